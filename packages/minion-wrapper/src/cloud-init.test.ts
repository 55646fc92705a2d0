import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CLIENT_RECEIPTS_SCHEDULE_NAME,
  DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS,
  DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS,
  DEFAULT_EXTMODS_DIR,
  HOLD_SALT_MINION_SEMAPHORE,
  packageRoot,
  UNSET_MINION_OPTIONS,
  moduleBytes,
  moduleSha256,
  planCloudInit,
  renderCloudInit,
} from './index.js';

/** PyYAML, as cloud-init parses it: the project venv, else the system python3. */
function parseYaml(text: string): unknown {
  const venvPython = join(packageRoot(), '..', '..', '.venv', 'bin', 'python');
  const python = existsSync(venvPython) ? venvPython : 'python3';
  const script = 'import sys, json, yaml; json.dump(yaml.safe_load(sys.stdin.read()), sys.stdout)';
  return JSON.parse(execFileSync(python, ['-c', script], { input: text, encoding: 'utf8' })) as unknown;
}

interface WriteFile { path: string; owner: string; permissions: string; encoding?: string; content: string }
interface Fragment { bootcmd: string[][]; write_files: WriteFile[]; runcmd: string[][] }

const minionId = 'client-0b7e3a52-8f1c-4d2e-9a6b-3c5d7e9f1a2b';
const work = mkdtempSync(join(tmpdir(), 'oduflow-cloud-init-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('renderCloudInit', () => {
  it('renders a #cloud-config document whose write_files carry the exact module bytes', () => {
    const text = renderCloudInit({ minionId, masterHost: 'salt.example.net' });
    expect(text.startsWith('#cloud-config\n')).toBe(true);
    const doc = parseYaml(text) as Fragment;
    const [module, config] = doc.write_files;
    expect(module?.path).toBe(`${DEFAULT_EXTMODS_DIR}/modules/oduflow_job.py`);
    expect(module?.encoding).toBe('b64');
    expect(module?.owner).toBe('root:root');
    expect(module?.permissions).toBe('0644');
    expect(Buffer.from(module?.content ?? '', 'base64').equals(moduleBytes())).toBe(true);
    expect(config?.path).toBe('/etc/salt/minion.d/oduflow.conf');
    const settings = parseYaml(config?.content ?? '') as Record<string, unknown>;
    expect(settings).toEqual({
      id: minionId,
      master: 'salt.example.net',
      // readiness: oduflow_job.capabilities is ready only with exactly these
      multiprocessing: true,
      cache_jobs: false,
      minion_pillar_cache: false,
      pillar_cache: false,
      gpg_cache: false,
      extension_modules: DEFAULT_EXTMODS_DIR,
      // no unchecked sync of the master's _modules/ before a highstate, and no sync deleting the module
      autoload_dynamic_modules: false,
      clean_dynamic_modules: false,
      schedule: {
        [CLIENT_RECEIPTS_SCHEDULE_NAME]: {
          function: 'state.apply',
          args: ['client_receipts'],
          seconds: DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS,
          splay: DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS,
          run_on_start: false,
          jid_include: false,
          return_job: false,
        },
      },
    });
    for (const option of UNSET_MINION_OPTIONS) expect(settings).not.toHaveProperty(option);
  });

  it('schedules client_receipts hourly with up to ten minutes of splay by default, configurable within bounds', () => {
    expect([DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS, DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS]).toEqual([3600, 600]);
    const plan = planCloudInit({ minionId, masterHost: 'salt', clientReceiptsIntervalSeconds: 900, clientReceiptsSplaySeconds: 60 });
    expect(plan.schedule).toEqual({ name: CLIENT_RECEIPTS_SCHEDULE_NAME, intervalSeconds: 900, splaySeconds: 60 });
    const settings = parseYaml(plan.files[1]?.content.toString('utf8') ?? '') as { schedule: Record<string, { seconds: number; splay: number }> };
    expect(settings.schedule[CLIENT_RECEIPTS_SCHEDULE_NAME]).toMatchObject({ seconds: 900, splay: 60 });
    const bad: Array<[number, number]> = [[59, 1], [604_801, 1], [900.5, 1], [Number.NaN, 1], [900, 0], [900, 901], [900, 1.5]];
    for (const [interval, splay] of bad) {
      expect(() =>
        planCloudInit({ minionId, masterHost: 'salt', clientReceiptsIntervalSeconds: interval, clientReceiptsSplaySeconds: splay }),
      ).toThrow(expect.objectContaining({ code: 'invalid_schedule' }));
    }
    expect(planCloudInit({ minionId, masterHost: 'salt', clientReceiptsIntervalSeconds: 60, clientReceiptsSplaySeconds: 60 }).schedule.intervalSeconds).toBe(60);
  });

  it('masks and then stops salt-minion once per instance in bootcmd, before write_files installs anything', () => {
    const text = renderCloudInit({ minionId, masterHost: 'salt' });
    const doc = parseYaml(text) as Fragment;
    expect(doc.bootcmd).toEqual([['cloud-init-per', 'instance', HOLD_SALT_MINION_SEMAPHORE, 'sh', '-ec', 'systemctl mask salt-minion\nsystemctl stop salt-minion']]);
    // cloud-init runs bootcmd before write_files in the init stage; the document says so in that order too
    expect(text.indexOf('bootcmd:')).toBeLessThan(text.indexOf('write_files:'));
    expect(text.indexOf('write_files:')).toBeLessThan(text.indexOf('runcmd:'));
  });

  it('checks the module digest with sha256sum before it enables or starts salt-minion', () => {
    const doc = parseYaml(renderCloudInit({ minionId, masterHost: '10.0.0.5', extmodsDir: '/srv/extmods/' })) as Fragment;
    expect(doc.runcmd).toHaveLength(1);
    const [shell, flags, script] = doc.runcmd[0] ?? [];
    expect([shell, flags]).toEqual(['sh', '-ec']);
    expect(script).toContain(`${moduleSha256()}  /srv/extmods/modules/oduflow_job.py`);
    const check = script?.indexOf('sha256sum --check') ?? -1;
    expect(check).toBeGreaterThanOrEqual(0);
    const unmask = script?.indexOf('systemctl unmask salt-minion') ?? -1;
    expect(unmask).toBeGreaterThan(check);
    expect(script?.indexOf('systemctl enable salt-minion')).toBeGreaterThan(unmask);
    expect(script?.indexOf('systemctl restart salt-minion')).toBeGreaterThan(unmask);
  });

  it('unmasks and starts salt-minion only when the installed file matches the digest', () => {
    const root = join(work, 'runcmd');
    const extmods = join(root, 'extmods');
    const plan = planCloudInit({ minionId, masterHost: '127.0.0.1', extmodsDir: extmods });
    const bin = join(root, 'bin');
    mkdirSync(bin, { recursive: true });
    const log = join(root, 'systemctl.log');
    writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${log}'\n`);
    chmodSync(join(bin, 'systemctl'), 0o755);
    const module = plan.files[0];
    if (!module) throw new Error('plan has no module file');
    mkdirSync(dirname(module.path), { recursive: true });
    writeFileSync(module.path, module.content);
    const run = () =>
      spawnSync('sh', ['-ec', plan.runcmdScript], { env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}` }, encoding: 'utf8' });

    const good = run();
    expect(good.status).toBe(0);
    const started = 'unmask salt-minion\nenable salt-minion\nrestart salt-minion\n';
    expect(readFileSync(log, 'utf8')).toBe(started);

    writeFileSync(module.path, Buffer.concat([module.content, Buffer.from('\n# tampered\n')]));
    const bad = run();
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('does not match the reviewed SHA-256; salt-minion stays masked');
    expect(readFileSync(log, 'utf8')).toBe(started);
  });

  it('refuses a minion id that is not client- plus a canonical lowercase UUID', () => {
    const bad = [
      'client-0B7E3A52-8F1C-4D2E-9A6B-3C5D7E9F1A2B',
      'client-0b7e3a52-8f1c-0d2e-9a6b-3c5d7e9f1a2b',
      'client-0b7e3a52-8f1c-9d2e-9a6b-3c5d7e9f1a2b',
      'client-0b7e3a52-8f1c-4d2e-ca6b-3c5d7e9f1a2b',
      'client-00000000-0000-0000-0000-000000000000',
      'client-ffffffff-ffff-ffff-ffff-ffffffffffff',
      `${minionId}\n`,
      minionId.slice('client-'.length),
      `xclient-${minionId.slice('client-'.length)}`,
      'client-0b7e3a528f1c4d2e9a6b3c5d7e9f1a2b',
    ];
    for (const id of bad) {
      expect(() => renderCloudInit({ minionId: id, masterHost: 'salt' })).toThrow(
        expect.objectContaining({ code: 'invalid_minion_id' }),
      );
    }
  });

  it('refuses a master or an extmods path that could break out of the YAML or the shell', () => {
    for (const masterHost of ['', 'salt;reboot', 'a b', "salt'", '-salt', 'salt\n']) {
      expect(() => renderCloudInit({ minionId, masterHost })).toThrow(expect.objectContaining({ code: 'invalid_master_host' }));
    }
    for (const extmodsDir of ['relative/dir', '/', '/var/../etc', "/var/o'dd", '/var//x', '/var/$HOME']) {
      expect(() => renderCloudInit({ minionId, masterHost: 'salt', extmodsDir })).toThrow(
        expect.objectContaining({ code: 'invalid_path' }),
      );
    }
    expect(planCloudInit({ minionId, masterHost: '::1' }).masterHost).toBe('::1');
  });

  it('accepts only IP addresses (net.isIP), RFC 1123 host names and Salt host:port forms as master', () => {
    const good = [
      'salt', 'salt.internal', 'salt.example.net.', 'a-1.b2', '10.0.0.5', '::1', 'fe80::1', '2001:db8::1',
      '::ffff:10.0.0.5', 'salt.internal:4506', '10.0.0.5:4506', '[2001:db8::1]:4506', 'salt:65535',
    ];
    for (const masterHost of good) expect(planCloudInit({ minionId, masterHost }).masterHost).toBe(masterHost);
    const bad = [
      '1.2.3.4:', 'salt:', '[::1]:', 'salt:0', 'salt:65536', 'salt:04506', 'salt:x', '[::1]', '[salt]:4506',
      '10.0.0.999', '1.2.3', '12345', '10.0.0.5.6', 'salt.123', '::::', ':', '1:2', 'abc:def:1', 'fe80::1:4506x',
      'salt-.internal', 'salt..internal', `${'a'.repeat(64)}.net`, `${'a.'.repeat(127)}net`, '1.2.3.4:4506:1',
    ];
    for (const masterHost of bad) {
      expect(() => planCloudInit({ minionId, masterHost }), masterHost).toThrow(
        expect.objectContaining({ code: 'invalid_master_host' }),
      );
    }
  });
});
