import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { isSemver } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { clientReceiptsSlsPath, moduleBytes, modulePath, moduleSha256, moduleVersion, packageRoot, parseModuleVersion } from './index.js';

const MODULE_PATH = modulePath();
const PACKAGE_ROOT = packageRoot();

/**
 * Loads a built entry in a fresh Node process with the fs functions counted,
 * and prints what it touched while being imported (module files aside: the
 * loader reads those) and the module path it then finds on first use.
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
process.stdout.write(JSON.stringify({ atImport, modulePath: m.modulePath() }));
`;

function probeImport(kind: 'cjs' | 'esm', entry: string): { atImport: string[]; modulePath: string } {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', IMPORT_PROBE, kind, entry], { encoding: 'utf8' });
  return JSON.parse(out) as { atImport: string[]; modulePath: string };
}

describe('the shipped module asset', () => {
  it('locates the module and the state template inside the package salt/ tree', () => {
    expect(isAbsolute(MODULE_PATH)).toBe(true);
    expect(MODULE_PATH).toBe(join(PACKAGE_ROOT, 'salt', '_modules', 'oduflow_job.py'));
    expect(clientReceiptsSlsPath()).toBe(join(PACKAGE_ROOT, 'salt', 'client_receipts', 'init.sls'));
    const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { files: string[] };
    expect(manifest.files).toContain('salt');
  });

  it('reports a digest that matches the bytes as sha256sum sees them', () => {
    const expected = execFileSync('sha256sum', [MODULE_PATH], { encoding: 'utf8' }).split(' ')[0];
    expect(moduleSha256()).toBe(expected);
    expect(moduleSha256()).toMatch(/^[0-9a-f]{64}$/);
    expect(moduleBytes().equals(readFileSync(MODULE_PATH))).toBe(true);
  });

  it('reads the module version from its single __version__ line', () => {
    const line = /^__version__ = "([^"]+)"$/m.exec(readFileSync(MODULE_PATH, 'utf8'));
    expect(moduleVersion()).toBe(line?.[1]);
  });

  it('refuses a module source without exactly one semver __version__ line', () => {
    expect(parseModuleVersion('__version__ = "1.2.3"\n')).toBe('1.2.3');
    for (const source of ['', '__version__ = "1.2"\n', '__version__ = "1.0.0"\n__version__ = "1.0.1"\n', "__version__ = '1.0.0'\n"]) {
      expect(() => parseModuleVersion(source)).toThrow(expect.objectContaining({ code: 'module_version_missing' }));
    }
  });

  it('accepts exactly the versions the protocol calls semver (one pattern, in @oduflow/protocol)', () => {
    // 1.0.0-01 was accepted here and refused by the protocol: numeric pre-release identifiers have no leading zeros
    const versions = ['1.1.0', '1.0.0-01', '1.0.0-rc.1', '1.0.0-0a', '01.0.0', '1.0.0+build.01', '1.0.0-', '1.0.0-a..b'];
    for (const version of versions) {
      const source = `__version__ = "${version}"\n`;
      if (isSemver(version)) expect(parseModuleVersion(source)).toBe(version);
      else expect(() => parseModuleVersion(source), version).toThrow(expect.objectContaining({ code: 'module_version_missing' }));
    }
    expect(() => parseModuleVersion('__version__ = "1.0.0-01"\n')).toThrow(expect.objectContaining({ code: 'module_version_missing' }));
  });

  it('reads nothing when imported, and finds the same module path on first use from the built ESM and CJS entries', () => {
    const dist = join(PACKAGE_ROOT, 'dist');
    for (const [kind, file] of [['esm', 'index.js'], ['cjs', 'index.cjs']] as const) {
      const probe = probeImport(kind, join(dist, file));
      expect(probe.atImport, kind).toEqual([]);
      expect(probe.modulePath, kind).toBe(MODULE_PATH);
    }
  });
});
