#!/usr/bin/env node
// Bundles bench/admission.ts (Node 20 cannot run TypeScript; the service under load is the built dist/cli.js) and runs it in a fresh process. ODUFLOW_BENCH_MODE (smoke, default, full) picks the sizes; the result is .test-results/bench/admission.json.
import { buildSync } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
if (!existsSync(join(appDir, 'dist', 'cli.js'))) {
  console.error('apps/master/dist/cli.js is missing: build first (npx nx run oduflow-master:build)');
  process.exit(1);
}
// build/bench/: two levels below the app, as tests/support/ is, so its paths to dist/ hold in the bundle.
const outfile = join(appDir, 'build', 'bench', 'admission.mjs');
mkdirSync(dirname(outfile), { recursive: true });
buildSync({ entryPoints: [join(appDir, 'bench', 'admission.ts')], bundle: true, packages: 'external', platform: 'node', format: 'esm', target: 'node20', outfile, logLevel: 'error' });
const run = spawnSync(process.execPath, [outfile], { cwd: appDir, stdio: 'inherit' });
process.exit(run.status ?? 1);
