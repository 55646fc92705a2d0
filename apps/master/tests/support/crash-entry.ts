import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'tsup';

/*
 * Bundles the test-only crash entry (crash-cli.ts) before the tests that
 * need it. The bundle lives beside node_modules (so @oduflow/* resolve to the
 * same built libraries the CLI runs), never in dist/ (what ships).
 */
const CACHE = fileURLToPath(new URL('../../node_modules/.cache/oduflow-crash-cli/', import.meta.url));

/**
 * Bundles a test-only entry (crash-cli.ts, or rollout-cli.ts) into a directory of this test process's own (test files
 * run in parallel) and returns its path: `node <it> <crash point> <oduflow-master arguments...>`.
 */
export async function buildCrashCli(name: 'crash-cli' | 'rollout-cli' = 'crash-cli'): Promise<string> {
  const outDir = join(CACHE, `${process.pid}-${randomBytes(4).toString('hex')}`);
  await build({
    entry: { [name]: fileURLToPath(new URL(`./${name}.ts`, import.meta.url)) },
    outDir,
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    config: false,
    silent: true,
    dts: false,
    sourcemap: false,
    clean: false,
    // Only the entry and src/ are bundled; every package stays external.
    external: [/^@oduflow\//, /^[a-z]/],
  });
  return join(outDir, `${name}.js`);
}

/** Removes a bundle made by buildCrashCli. */
export function removeCrashCli(path: string): void {
  rmSync(dirname(path), { recursive: true, force: true });
}
