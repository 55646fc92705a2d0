#!/usr/bin/env node
// Bundles bench/live.ts (Node 20 cannot run TypeScript; the workspace packages stay imports of their built dist) and runs it in a fresh process.
// ODUFLOW_BENCH_MODE (smoke|default|full) picks the sizes; results go to <repo>/.test-results/bench unless ODUFLOW_BENCH_OUT names another directory.
import { buildSync } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const outfile = join(packageDir, 'build', 'bench-live.mjs');
mkdirSync(dirname(outfile), { recursive: true });
buildSync({ entryPoints: [join(packageDir, 'bench', 'live.ts')], bundle: true, packages: 'external', platform: 'node', format: 'esm', target: 'node20', outfile, logLevel: 'error' });
const run = spawnSync(process.execPath, [outfile], {
  cwd: packageDir,
  stdio: 'inherit',
  env: { ...process.env, ODUFLOW_REPO_ROOT: resolve(packageDir, '..', '..') },
});
process.exit(run.status ?? 1);
