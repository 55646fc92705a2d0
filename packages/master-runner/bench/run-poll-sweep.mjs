#!/usr/bin/env node
// Bundles bench/poll-sweep.ts (Node 20 cannot run TypeScript; our packages stay imports of their built dist) and runs it in a fresh process with --expose-gc, so its CPU and RSS are the poller's alone. ODUFLOW_BENCH_MODE (smoke, default, full) picks the sizes; the result is .test-results/bench/poll-sweep.json.
import { buildSync } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const outfile = join(packageDir, 'build', 'poll-sweep.mjs');
mkdirSync(dirname(outfile), { recursive: true });
buildSync({ entryPoints: [join(packageDir, 'bench', 'poll-sweep.ts')], bundle: true, packages: 'external', platform: 'node', format: 'esm', target: 'node20', outfile, logLevel: 'error' });
const run = spawnSync(process.execPath, ['--expose-gc', outfile], { cwd: packageDir, stdio: 'inherit' });
process.exit(run.status ?? 1);
