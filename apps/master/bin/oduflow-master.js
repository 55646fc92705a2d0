#!/usr/bin/env node
/*
 * The `oduflow-master` executable that npm links. It is committed, unlike
 * dist/: npm links a workspace's `bin` at `npm ci` time only when the file
 * exists, and the build comes later. Without the build it says so and exits 1
 * (internal: nothing was decided).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  process.stderr.write(
    `oduflow-master is not built: ${fileURLToPath(cli)} is missing.\n` +
      'Build it from the repository root: npx nx run oduflow-master:build (or npm run build).\n',
  );
  process.exit(1);
}
await import(cli.href);
