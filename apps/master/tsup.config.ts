import { cpSync, existsSync } from 'node:fs';
import { defineConfig } from 'tsup';
import { sharedTsupConfig } from '../../tsup.shared.js';

// The operator dashboard's front end, built by apps/dashboard (nx builds it
// first: an implicit dependency), travels inside dist/ as dist/ui, so every
// artefact of this app (the repository, `npm run pack:master`) serves it.
const DASHBOARD = '../dashboard/dist';

// An application, not a library: one ESM executable with its shebang.
export default defineConfig(
  sharedTsupConfig({
    entry: { cli: 'src/cli.ts' },
    format: ['esm'],
    dts: false,
    banner: { js: '#!/usr/bin/env node' },
    onSuccess: () => {
      if (!existsSync(`${DASHBOARD}/index.html`)) throw new Error('apps/dashboard is not built: run `npx nx run oduflow-dashboard:build` (nx builds it before this app)');
      cpSync(DASHBOARD, 'dist/ui', { recursive: true, filter: (path) => !path.endsWith('.map') });
      return Promise.resolve();
    },
  }),
);
