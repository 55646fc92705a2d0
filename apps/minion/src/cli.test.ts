import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { moduleBytes, moduleSha256, renderClientReceiptsSls } from '@oduflow/minion-wrapper';
import { afterAll, describe, expect, it } from 'vitest';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const work = mkdtempSync(join(tmpdir(), 'oduflow-minion-cli-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Runs the built bin as a real process, through its #! line. */
const run = (...args: string[]) => spawnSync(cli, args, { encoding: 'utf8' });
const minionId = 'client-5d1f6c9e-2b4a-4c8d-8e7f-0a1b2c3d4e5f';

describe('oduflow-minion', () => {
  it('is built as an executable ESM script', () => {
    expect(readFileSync(cli, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(statSync(cli).mode & 0o111).not.toBe(0);
  });

  it('prints the cloud-init fragment carrying the reviewed module', () => {
    const result = run('cloud-init', '--minion-id', minionId, '--master', 'salt.internal', '--extmods', '/opt/extmods');
    expect(result.status).toBe(0);
    expect(result.stdout.startsWith('#cloud-config\n')).toBe(true);
    expect(result.stdout).toContain('- path: "/opt/extmods/modules/oduflow_job.py"');
    expect(result.stdout).toContain(moduleBytes().toString('base64'));
    expect(result.stdout).toContain(`${moduleSha256()}  /opt/extmods/modules/oduflow_job.py`);
  });

  it('schedules client_receipts with the interval and splay given, and refuses anything but whole seconds in range', () => {
    const result = run('cloud-init', '--minion-id', minionId, '--master', 'salt', '--client-receipts-interval', '900', '--client-receipts-splay', '30');
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain('\\n    seconds: 900\\n    splay: 30\\n');
    const defaults = run('cloud-init', '--minion-id', minionId, '--master', 'salt');
    expect(defaults.stdout).toContain('\\n    seconds: 3600\\n    splay: 600\\n');
    for (const [interval, splay] of [['59', '1'], ['1e3', '1'], ['0x100', '1'], ['900.0', '1'], ['900', '0'], ['900', '901'], ['-900', '1']]) {
      const bad = run('cloud-init', '--minion-id', minionId, '--master', 'salt', '--client-receipts-interval', interval as string, '--client-receipts-splay', splay as string);
      expect(bad.status, `${interval} ${splay}`).toBe(2);
      expect(bad.stdout).toBe('');
      expect(bad.stderr).toContain('invalid_schedule');
    }
  });

  it('refuses a non-canonical minion id with exit 2 (refused) and no output', () => {
    const result = run('cloud-init', '--minion-id', 'client-NOT-A-UUID', '--master', 'salt');
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('invalid_minion_id');
    expect(result.stderr).not.toContain('NOT-A-UUID');
  });

  it('exits 2 on any bad input: unknown option, missing option, bad host', () => {
    expect(run('verify').status).toBe(2);
    expect(run('verify', '--extmods', '/x', '--bogus').status).toBe(2);
    expect(run('nope').status).toBe(2);
    const host = run('cloud-init', '--minion-id', minionId, '--master', '1.2.3.4:');
    expect(host.status).toBe(2);
    expect(host.stderr).toContain('invalid_master_host');
  });

  it('with --json, prints errors as {"error":{"code","message"}} on stdout', () => {
    const usage = run('verify', '--json');
    expect(usage.status).toBe(2);
    expect(JSON.parse(usage.stdout)).toEqual({ error: { code: 'usage', message: expect.stringContaining('--extmods') as unknown } });
    expect(usage.stderr).toBe('');
    const refused = run('cloud-init', '--minion-id', 'client-NOT-A-UUID', '--master', 'salt', '--json');
    expect(refused.status).toBe(2);
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: 'usage' } });
    const blocked = join(work, 'blocked-json');
    mkdirSync(blocked);
    writeFileSync(join(blocked, 'modules'), 'not a directory');
    const internal = run('verify', '--extmods', blocked, '--json');
    expect(internal.status).toBe(1);
    expect(JSON.parse(internal.stdout)).toEqual({ error: { code: 'internal', message: expect.stringContaining('internal error') as unknown } });
  });

  it('writes the file tree a master serves', () => {
    const out = join(work, 'srv');
    const result = run('file-tree', '--out', out, '--json');
    expect(result.status).toBe(0);
    const tree = JSON.parse(result.stdout) as { moduleSha256: string; files: Array<{ path: string }> };
    expect(tree.moduleSha256).toBe(moduleSha256());
    expect(tree.files.map((f) => f.path)).toEqual(['oduflow/oduflow_job.py', 'client_receipts/init.sls', 'SHA256SUMS']);
    expect(readFileSync(join(out, 'oduflow', 'oduflow_job.py')).equals(moduleBytes())).toBe(true);
    expect(readFileSync(join(out, 'client_receipts', 'init.sls'), 'utf8')).toBe(renderClientReceiptsSls());
    expect(spawnSync('sha256sum', ['--check', '--status', 'SHA256SUMS'], { cwd: out }).status).toBe(0);
  });

  it('writes each file of the tree durably: fsync of the file, rename, then fsync of its directory (strace)', () => {
    const out = join(work, 'srv-traced');
    const trace = join(work, 'file-tree.strace');
    const traced = spawnSync('strace', ['-f', '-qq', '-y', '-o', trace, '-e', 'trace=fsync,renameat2', cli, 'file-tree', '--out', out], { encoding: 'utf8' });
    if (traced.error) throw new Error(`strace is required for this test and could not run: ${traced.error.message}`);
    expect(traced.status, traced.stderr).toBe(0);
    const calls = readFileSync(trace, 'utf8').split('\n').map((line) => line.replace(/^\d+\s+/, '')).filter((line) => line.includes(out));
    for (const [dir, name] of [[out, 'SHA256SUMS'], [join(out, 'oduflow'), 'oduflow_job.py'], [join(out, 'client_receipts'), 'init.sls']] as const) {
      const rename = calls.findIndex((line) => line.startsWith('renameat2(') && line.includes(`<${dir}>, "${name}", 0)`));
      const temp = /"(\.tmp-[0-9a-f]+)"/.exec(calls[rename] ?? '')?.[1];
      expect(temp, `${name}: ${calls.join('\n')}`).toBeDefined();
      const fsyncFile = calls.findIndex((line) => line.startsWith('fsync(') && line.includes(`${dir}/${temp}>`));
      const fsyncDir = calls.findIndex((line, i) => i > rename && line.startsWith(`fsync(`) && line.includes(`<${dir}>)`));
      expect(fsyncFile, name).toBeGreaterThanOrEqual(0);
      expect(fsyncFile, name).toBeLessThan(rename);
      expect(fsyncDir, name).toBeGreaterThan(rename);
    }
    // SHA256SUMS is renamed into place last: it never lists a file that is not there yet
    const renames = calls.filter((line) => line.startsWith('renameat2(')).map((line) => /, "([^"]+)", 0\)/.exec(line)?.[1]);
    expect(renames).toEqual(['oduflow_job.py', 'init.sls', 'SHA256SUMS']);
  });

  it('verifies an installed module: 0 when it matches, 2 when changed or missing', () => {
    const extmods = join(work, 'extmods');
    const installed = join(extmods, 'modules', 'oduflow_job.py');
    mkdirSync(dirname(installed), { recursive: true });
    writeFileSync(installed, moduleBytes());
    chmodSync(installed, 0o644);

    const ok = run('verify', '--extmods', extmods, '--json');
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, status: 'ok', actualSha256: moduleSha256() });
    const table = run('verify', '--extmods', extmods);
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(/^status +ok$/m);

    writeFileSync(installed, Buffer.concat([moduleBytes(), Buffer.from('\n')]));
    const changed = run('verify', '--extmods', extmods, '--json');
    expect(changed.status).toBe(2);
    expect(JSON.parse(changed.stdout)).toMatchObject({ ok: false, status: 'digest_mismatch' });

    const missing = run('verify', '--extmods', join(work, 'empty'), '--json');
    expect(missing.status).toBe(2);
    expect(JSON.parse(missing.stdout)).toMatchObject({ ok: false, status: 'missing' });

    writeFileSync(installed, moduleBytes());
    chmodSync(installed, 0o4755);
    const setuid = run('verify', '--extmods', extmods, '--json');
    expect(JSON.parse(setuid.stdout)).toMatchObject({ ok: true, mode: '4755' });
  });

  it('exits 1 on an internal error such as an unreadable extmods directory', () => {
    const blocked = join(work, 'blocked');
    mkdirSync(blocked);
    writeFileSync(join(blocked, 'modules'), 'not a directory');
    const result = run('verify', '--extmods', blocked);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('internal error');
  });
});
