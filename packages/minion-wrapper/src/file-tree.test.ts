import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { moduleBytes, moduleSha256, moduleVersion, renderClientReceiptsSls, verifyInstalledModule, writeSaltFileTree } from './index.js';

const work = mkdtempSync(join(tmpdir(), 'oduflow-file-tree-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('writeSaltFileTree', () => {
  it('writes the module, the rendered state and a SHA256SUMS that sha256sum accepts', () => {
    const out = join(work, 'srv');
    mkdirSync(join(out, 'roles'), { recursive: true });
    writeFileSync(join(out, 'roles', 'keep.sls'), 'x: {}\n');
    const tree = writeSaltFileTree(out);
    expect(tree.moduleSha256).toBe(moduleSha256());
    expect(tree.moduleVersion).toBe(moduleVersion());
    // served outside _modules/: saltutil.sync_* must never install it unchecked
    expect(tree.files.map((f) => f.path)).toEqual(['oduflow/oduflow_job.py', 'client_receipts/init.sls', 'SHA256SUMS']);
    expect(readFileSync(join(out, 'oduflow', 'oduflow_job.py')).equals(moduleBytes())).toBe(true);
    expect(existsSync(join(out, '_modules'))).toBe(false);
    expect(readFileSync(join(out, 'client_receipts', 'init.sls'), 'utf8')).toBe(renderClientReceiptsSls());
    expect(readFileSync(join(out, 'roles', 'keep.sls'), 'utf8')).toBe('x: {}\n');
    const check = execFileSync('sha256sum', ['--check', '--strict', 'SHA256SUMS'], { cwd: out, encoding: 'utf8' });
    expect(check).toBe('oduflow/oduflow_job.py: OK\nclient_receipts/init.sls: OK\n');
    expect(spawnSync('sha256sum', ['--check', 'SHA256SUMS'], { cwd: out }).status).toBe(0);
  });

  it('writes 0644 files in 0755 directories whatever the umask, through atomic renames that leave no temporary file', () => {
    const out = join(work, 'srv-umask');
    const previous = process.umask(0o077);
    try {
      writeSaltFileTree(out);
      writeSaltFileTree(out); // a refresh replaces each file in place
    } finally {
      process.umask(previous);
    }
    for (const path of ['oduflow/oduflow_job.py', 'client_receipts/init.sls', 'SHA256SUMS']) {
      expect(statSync(join(out, path)).mode & 0o7777, path).toBe(0o644);
    }
    for (const dir of [out, join(out, 'oduflow'), join(out, 'client_receipts')]) {
      expect(statSync(dir).mode & 0o7777, dir).toBe(0o755);
      expect(readdirSync(dir).filter((name) => name.startsWith('.tmp-')), dir).toEqual([]);
    }
  });
});

describe('verifyInstalledModule', () => {
  const install = (name: string, content: Buffer, mode = 0o644): string => {
    const extmods = join(work, name);
    mkdirSync(join(extmods, 'modules'), { recursive: true });
    writeFileSync(join(extmods, 'modules', 'oduflow_job.py'), content);
    chmodSync(join(extmods, 'modules', 'oduflow_job.py'), mode);
    return extmods;
  };

  it('accepts the reviewed module', () => {
    const result = verifyInstalledModule(install('ok', moduleBytes()));
    expect(result).toMatchObject({ ok: true, status: 'ok', actualSha256: moduleSha256(), mode: '0644' });
  });

  it('reports a changed, missing, linked or group-writable module', () => {
    expect(verifyInstalledModule(install('changed', Buffer.concat([moduleBytes(), Buffer.from('#')])))).toMatchObject({
      ok: false,
      status: 'digest_mismatch',
    });
    expect(verifyInstalledModule(join(work, 'nothing'))).toMatchObject({ ok: false, status: 'missing', mode: null });
    const linked = join(work, 'linked');
    mkdirSync(join(linked, 'modules'), { recursive: true });
    symlinkSync(join(install('target', moduleBytes()), 'modules', 'oduflow_job.py'), join(linked, 'modules', 'oduflow_job.py'));
    expect(verifyInstalledModule(linked)).toMatchObject({ ok: false, status: 'not_a_regular_file' });
    expect(verifyInstalledModule(install('writable', moduleBytes(), 0o664))).toMatchObject({
      ok: false,
      status: 'unsafe_permissions',
      mode: '0664',
    });
  });

  it('reports all 12 mode bits', () => {
    expect(verifyInstalledModule(install('setuid', moduleBytes(), 0o4755))).toMatchObject({ ok: true, mode: '4755' });
    expect(verifyInstalledModule(install('sticky', moduleBytes(), 0o1644))).toMatchObject({ ok: true, mode: '1644' });
  });

  it('refuses a multiply linked module', () => {
    const extmods = install('hardlink', moduleBytes());
    linkSync(join(extmods, 'modules', 'oduflow_job.py'), join(work, 'hardlink-other-name.py'));
    expect(verifyInstalledModule(extmods)).toMatchObject({ ok: false, status: 'multiply_linked', actualSha256: moduleSha256() });
  });

  it.runIf(process.geteuid?.() === 0)('refuses a module owned by neither root nor the euid (as root: chown 65534)', () => {
    const extmods = install('owner', moduleBytes());
    chownSync(join(extmods, 'modules', 'oduflow_job.py'), 65534, 65534);
    expect(verifyInstalledModule(extmods)).toMatchObject({ ok: false, status: 'unsafe_owner', uid: 65534 });
  });

  it('refuses a group/other-writable, foreign-owned or symlinked extmods or modules directory', () => {
    const writable = install('modules-0777', moduleBytes());
    chmodSync(join(writable, 'modules'), 0o777);
    expect(verifyInstalledModule(writable)).toMatchObject({
      ok: false,
      status: 'unsafe_directory',
      unsafePath: join(writable, 'modules'),
    });
    const writableRoot = install('extmods-0775', moduleBytes());
    chmodSync(writableRoot, 0o775);
    expect(verifyInstalledModule(writableRoot)).toMatchObject({ ok: false, status: 'unsafe_directory', unsafePath: writableRoot });

    const real = install('modules-real', moduleBytes());
    const linked = join(work, 'modules-symlink');
    mkdirSync(linked);
    symlinkSync(join(real, 'modules'), join(linked, 'modules'));
    expect(verifyInstalledModule(linked)).toMatchObject({ ok: false, status: 'unsafe_directory', unsafePath: join(linked, 'modules') });

    const linkedRoot = join(work, 'extmods-symlink');
    symlinkSync(real, linkedRoot);
    expect(verifyInstalledModule(linkedRoot)).toMatchObject({ ok: false, status: 'unsafe_directory', unsafePath: linkedRoot });

    if (process.geteuid?.() === 0) {
      const foreign = install('modules-foreign', moduleBytes());
      chownSync(join(foreign, 'modules'), 65534, 65534);
      expect(verifyInstalledModule(foreign)).toMatchObject({ ok: false, status: 'unsafe_directory' });
    }
  });
});
