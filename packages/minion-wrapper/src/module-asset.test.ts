import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { isSemver } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import {
  CLIENT_RECEIPTS_SLS_PATH,
  MODULE_PATH,
  PACKAGE_ROOT,
  moduleBytes,
  moduleSha256,
  moduleVersion,
  parseModuleVersion,
} from './index.js';

describe('the shipped module asset', () => {
  it('locates the module and the state template inside the package salt/ tree', () => {
    expect(isAbsolute(MODULE_PATH)).toBe(true);
    expect(MODULE_PATH).toBe(join(PACKAGE_ROOT, 'salt', '_modules', 'oduflow_job.py'));
    expect(CLIENT_RECEIPTS_SLS_PATH).toBe(join(PACKAGE_ROOT, 'salt', 'client_receipts', 'init.sls'));
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

  it('resolves the same module path from the built ESM and CJS entries', () => {
    const dist = join(PACKAGE_ROOT, 'dist');
    const cjs = execFileSync(process.execPath, ['-e', `process.stdout.write(require(${JSON.stringify(join(dist, 'index.cjs'))}).MODULE_PATH)`], { encoding: 'utf8' });
    const esm = execFileSync(
      process.execPath,
      ['--input-type=module', '-e', `const m = await import(${JSON.stringify(join(dist, 'index.js'))}); process.stdout.write(m.MODULE_PATH)`],
      { encoding: 'utf8' },
    );
    expect(cjs).toBe(MODULE_PATH);
    expect(esm).toBe(MODULE_PATH);
  });
});
