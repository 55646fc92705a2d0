// The fragment `oduflow-minion cloud-init` prints, played through the stages
// cloud-init runs it in, on both kinds of image: one that ships salt-minion
// disabled and one that ships it enabled (systemd starts it at boot, racing
// cloud-init). systemctl and cloud-init-per are stand-ins on PATH that keep
// the unit's state in files and refuse to start or enable a masked unit, as
// systemd does; every start records the digest of the installed module at
// that moment. The built CLI renders the fragment and verifies the result.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { moduleBytes, moduleSha256, packageRoot } from '@oduflow/minion-wrapper';
import { afterAll, describe, expect, it } from 'vitest';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const work = mkdtempSync(join(tmpdir(), 'oduflow-cloud-init-boot-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const minionId = 'client-5d1f6c9e-2b4a-4c8d-8e7f-0a1b2c3d4e5f';

const FAKE_SYSTEMCTL = `#!/bin/sh
# systemctl <verb> salt-minion, with the unit's state as files in $FAKE_SYSTEMD
d="$FAKE_SYSTEMD"
echo "$1 $2" >> "$d/log"
case "$1" in
  mask) touch "$d/masked" ;;
  unmask) rm -f "$d/masked" ;;
  enable)
    if [ -e "$d/masked" ]; then echo "Failed to enable unit: Unit file $2.service is masked." >&2; exit 1; fi
    touch "$d/enabled" ;;
  stop) rm -f "$d/active" ;;
  start|restart)
    if [ -e "$d/masked" ]; then echo "Failed to $1 $2.service: Unit $2.service is masked." >&2; exit 1; fi
    if [ -e "$FAKE_MODULE" ]; then sum=$(sha256sum "$FAKE_MODULE" | cut -d' ' -f1); else sum=missing; fi
    echo "running with $sum" >> "$d/log"
    touch "$d/active" ;;
  *) echo "fake systemctl: unexpected verb $1" >&2; exit 2 ;;
esac
`;

/** cloud-init-per <frequency> <name> <cmd...>: runs cmd unless it already succeeded once (per instance here). */
const FAKE_CLOUD_INIT_PER = `#!/bin/sh
sem="$FAKE_SYSTEMD/sem.$2.$1"
[ -e "$sem" ] && exit 0
shift 2
"$@" || exit $?
touch "$sem"
`;

interface Fragment {
  bootcmd: string[][];
  write_files: Array<{ path: string; permissions: string; encoding?: string; content: string }>;
  runcmd: string[][];
}

/** PyYAML, as cloud-init parses it: the project venv. */
function parseYaml(text: string): Fragment {
  const python = join(packageRoot(), '..', '..', '.venv', 'bin', 'python');
  if (!existsSync(python)) throw new Error(`no ${python}: run bash scripts/ensure-python.sh (npm test does)`);
  const script = 'import sys, json, yaml; json.dump(yaml.safe_load(sys.stdin.read()), sys.stdout)';
  return JSON.parse(execFileSync(python, ['-c', script], { input: text, encoding: 'utf8' })) as Fragment;
}

function machine(name: string) {
  const root = join(work, name);
  const state = join(root, 'systemd');
  const bin = join(root, 'bin');
  mkdirSync(state, { recursive: true });
  mkdirSync(bin);
  writeFileSync(join(bin, 'systemctl'), FAKE_SYSTEMCTL);
  writeFileSync(join(bin, 'cloud-init-per'), FAKE_CLOUD_INIT_PER);
  chmodSync(join(bin, 'systemctl'), 0o755);
  chmodSync(join(bin, 'cloud-init-per'), 0o755);
  const extmods = join(root, 'extmods');
  const modulePath = join(extmods, 'modules', 'oduflow_job.py');
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, FAKE_SYSTEMD: state, FAKE_MODULE: modulePath };
  const rendered = spawnSync(cli, ['cloud-init', '--minion-id', minionId, '--master', 'salt.internal', '--extmods', extmods], {
    encoding: 'utf8',
  });
  expect(rendered.status, rendered.stderr).toBe(0);
  const fragment = parseYaml(rendered.stdout);
  const sh = (argv: string[]) => {
    const [cmd, ...args] = argv;
    return spawnSync(cmd as string, args, { env, encoding: 'utf8' });
  };
  return {
    modulePath,
    extmods,
    /** systemd at boot: starts the unit if the image enabled it (refused while masked). */
    systemdBoot: () => (existsSync(join(state, 'enabled')) ? sh(['systemctl', 'start', 'salt-minion']) : null),
    imageEnablesMinion: () => writeFileSync(join(state, 'enabled'), ''),
    bootcmd: () => fragment.bootcmd.map((argv) => sh(argv)),
    /** write_files: the module at its real path, anything else (the /etc config) under the machine root. */
    writeFiles: () => {
      for (const file of fragment.write_files) {
        const target = file.path.startsWith(root) ? file.path : join(root, file.path);
        mkdirSync(dirname(target), { recursive: true });
        writeFileSync(target, file.encoding === 'b64' ? Buffer.from(file.content, 'base64') : file.content);
        chmodSync(target, Number.parseInt(file.permissions, 8));
      }
    },
    runcmd: () => fragment.runcmd.map((argv) => sh(argv)),
    log: () => readFileSync(join(state, 'log'), 'utf8').split('\n').filter((line) => line !== ''),
    is: (flag: 'masked' | 'enabled' | 'active') => existsSync(join(state, flag)),
    verify: () => spawnSync(cli, ['verify', '--extmods', extmods, '--json'], { encoding: 'utf8' }),
  };
}

const reviewed = `running with ${moduleSha256()}`;

describe('the cloud-init fragment through a first boot', () => {
  it('on an image that starts salt-minion at boot: masks and stops it before write_files, runs it only with the reviewed module', () => {
    const m = machine('enabled-image');
    m.imageEnablesMinion();
    expect(m.systemdBoot()?.status).toBe(0); // the race: salt-minion is up before cloud-init's init stage
    expect(m.bootcmd().map((r) => r.status)).toEqual([0]);
    expect([m.is('masked'), m.is('active')]).toEqual([true, false]);
    // anything that tries to start it between bootcmd and runcmd is refused
    expect(m.systemdBoot()?.status).toBe(1);
    m.writeFiles();
    expect(m.runcmd().map((r) => r.status)).toEqual([0]);
    expect([m.is('masked'), m.is('enabled'), m.is('active')]).toEqual([false, true, true]);
    expect(m.log()).toEqual([
      'start salt-minion',
      'running with missing',
      'mask salt-minion',
      'stop salt-minion',
      'start salt-minion',
      'unmask salt-minion',
      'enable salt-minion',
      'restart salt-minion',
      reviewed,
    ]);
    const verified = m.verify();
    expect(verified.status).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, actualSha256: moduleSha256(), mode: '0644' });

    // a reboot: bootcmd's cloud-init-per semaphore keeps it from masking the minion again
    writeFileSync(join(work, 'enabled-image', 'systemd', 'log'), '');
    expect(m.bootcmd().map((r) => r.status)).toEqual([0]);
    expect(m.systemdBoot()?.status).toBe(0);
    expect(m.log()).toEqual(['start salt-minion', reviewed]);
  });

  it('on an image that ships salt-minion disabled: the same steps, and it is enabled and running at the end', () => {
    const m = machine('disabled-image');
    expect(m.systemdBoot()).toBeNull();
    expect(m.bootcmd().map((r) => r.status)).toEqual([0]);
    m.writeFiles();
    expect(m.runcmd().map((r) => r.status)).toEqual([0]);
    expect([m.is('masked'), m.is('enabled'), m.is('active')]).toEqual([false, true, true]);
    expect(m.log()).toEqual([
      'mask salt-minion',
      'stop salt-minion',
      'unmask salt-minion',
      'enable salt-minion',
      'restart salt-minion',
      reviewed,
    ]);
    expect(m.verify().status).toBe(0);
  });

  it('leaves salt-minion masked and stopped when the installed module does not match, on both images', () => {
    for (const image of ['enabled', 'disabled'] as const) {
      const m = machine(`tampered-${image}`);
      if (image === 'enabled') m.imageEnablesMinion();
      m.systemdBoot();
      m.bootcmd();
      m.writeFiles();
      writeFileSync(m.modulePath, Buffer.concat([moduleBytes(), Buffer.from('\n# not the reviewed module\n')]));
      const [result] = m.runcmd();
      expect(result?.status, image).toBe(1);
      expect(result?.stderr).toContain('does not match the reviewed SHA-256; salt-minion stays masked');
      expect([m.is('masked'), m.is('active')], image).toEqual([true, false]);
      expect(m.log().filter((line) => line.startsWith('running with')), image).toEqual(image === 'enabled' ? ['running with missing'] : []);
      expect(m.systemdBoot()?.status ?? 1, image).toBe(1); // still refused on the next boot
      const verified = m.verify();
      expect(verified.status).toBe(2);
      expect(JSON.parse(verified.stdout)).toMatchObject({ ok: false, status: 'digest_mismatch' });
    }
  });
});
