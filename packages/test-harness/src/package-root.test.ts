import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fixturesDir } from './fixtures.js';
import { harnessRoot } from './package-root.js';

/**
 * Loads a built entry in a fresh Node process with the fs functions counted,
 * and prints what it touched while being imported (module files aside: the
 * loader reads those) and, for ./fixtures, the corpus it then finds.
 */
const IMPORT_PROBE = `
import fs from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
const [kind, entry] = process.argv.slice(1);
const touched = [];
for (const name of ['readFileSync', 'existsSync', 'statSync', 'lstatSync', 'readdirSync', 'openSync', 'accessSync']) {
  const original = fs[name];
  fs[name] = function (...args) {
    if (!/\\.(c|m)?js$/.test(String(args[0]))) touched.push(name + ' ' + String(args[0]));
    return original.apply(this, args);
  };
}
syncBuiltinESMExports();
const m = kind === 'cjs' ? createRequire(entry)(entry) : await import(entry);
const atImport = [...touched];
process.stdout.write(JSON.stringify({ atImport, fixtures: typeof m.fixturesDir === 'function' ? m.fixturesDir() : null }));
`;

function probeImport(kind: 'cjs' | 'esm', entry: string): { atImport: string[]; fixtures: string | null } {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', IMPORT_PROBE, kind, entry], { encoding: 'utf8' });
  return JSON.parse(out) as { atImport: string[]; fixtures: string | null };
}

describe('the package root', () => {
  it('is the directory of this package, with the corpus and the Python runners beside the sources', () => {
    expect(fixturesDir()).toBe(join(harnessRoot(), 'fixtures'));
    expect(harnessRoot()).toBe(join(import.meta.dirname, '..'));
  });

  it('is not looked up when a built entry is imported, and is found from the ESM and the CJS build on first use', () => {
    const dist = join(harnessRoot(), 'dist');
    for (const kind of ['esm', 'cjs'] as const) {
      const extension = kind === 'esm' ? 'js' : 'cjs';
      const fixtures = probeImport(kind, join(dist, `fixtures.${extension}`));
      expect(fixtures.atImport, kind).toEqual([]);
      expect(fixtures.fixtures, kind).toBe(fixturesDir());
      expect(probeImport(kind, join(dist, `topology.${extension}`)).atImport, kind).toEqual([]);
    }
  });
});
