import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The PostgreSQL store is a subpath of its own so that importing the package
 * root never loads node-postgres (the embedded file store needs none of it).
 * Checked on the built package, as users get it, in a fresh Node process
 * each: ESM and CommonJS, the root and the subpath (the subpath proves the
 * probe can see pg at all).
 */

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const ESM_PROBE = `
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const loaded = await import(process.argv[1]);
console.log(JSON.stringify({ exports: Object.keys(loaded).sort(), pg: Object.keys(require.cache).filter((p) => /[/]node_modules[/]pg[^/]*[/]/.test(p)).length }));
`;
const CJS_PROBE = `
const loaded = require(process.argv[1]);
console.log(JSON.stringify({ exports: Object.keys(loaded).sort(), pg: Object.keys(require.cache).filter((p) => /[/]node_modules[/]pg[^/]*[/]/.test(p)).length }));
`;

function probe(kind: 'esm' | 'cjs', specifier: string): { exports: string[]; pg: number } {
  const args = kind === 'esm' ? ['--input-type=module', '-e', ESM_PROBE, specifier] : ['-e', CJS_PROBE, specifier];
  const run = spawnSync(process.execPath, args, { cwd: packageDir, encoding: 'utf8', timeout: 20_000 });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as { exports: string[]; pg: number };
}

describe('the ./postgres subpath', () => {
  it('is built (run the build first)', () => {
    expect(existsSync(join(packageDir, 'dist', 'postgres', 'index.js'))).toBe(true);
    expect(existsSync(join(packageDir, 'dist', 'postgres', 'index.cjs'))).toBe(true);
  });

  for (const kind of ['esm', 'cjs'] as const) {
    it(`keeps pg out of the package root (${kind})`, () => {
      const root = probe(kind, '@oduflow/master-runner');
      expect(root.exports).toContain('createFileRecordStore');
      expect(root.exports).not.toContain('createPostgresRecordStore');
      expect(root.pg).toBe(0);
    });

    it(`exports the PostgreSQL store and loads pg only there (${kind})`, () => {
      const postgres = probe(kind, '@oduflow/master-runner/postgres');
      expect(postgres.exports).toEqual(['DEFAULT_LOCK_TIMEOUT_MS', 'DEFAULT_POOL_SIZE', 'POSTGRES_SCHEMA_VERSION', 'createPostgresRecordStore', 'migratePostgres']);
      expect(postgres.pg).toBeGreaterThan(0);
    });
  }
});
