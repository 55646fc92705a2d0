#!/usr/bin/env node
// Bundles bench/canonical-json.ts (Node 20 cannot run TypeScript) and runs it in a fresh process with --expose-gc; arguments pass through (--write-inputs regenerates bench/high-data-inputs.json).
import { buildSync } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const outfile = join(packageDir, 'build', 'canonical-json.mjs');
mkdirSync(dirname(outfile), { recursive: true });
buildSync({ entryPoints: [join(packageDir, 'bench', 'canonical-json.ts')], bundle: true, packages: 'external', platform: 'node', format: 'esm', target: 'node20', outfile, logLevel: 'error' });
const run = spawnSync(process.execPath, ['--expose-gc', outfile, ...process.argv.slice(2)], { cwd: packageDir, stdio: 'inherit' });
process.exit(run.status ?? 1);
