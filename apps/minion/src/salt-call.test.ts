// Real Salt (the project venv's salt-call, pinned 3006.27) against the file
// tree `oduflow-minion file-tree` writes and the minion config the cloud-init
// fragment writes: each minion is a private root_dir run with --local, as root.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { moduleBytes, moduleSha256, planCloudInit } from '@oduflow/minion-wrapper';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'dist', 'cli.js');
const saltCall = join(here, '..', '..', '..', '.venv', 'bin', 'salt-call');
const asRoot = process.geteuid?.() === 0;
const work = mkdtempSync(join(tmpdir(), 'oduflow-salt-call-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const minionId = 'client-5d1f6c9e-2b4a-4c8d-8e7f-0a1b2c3d4e5f';
const tampered = Buffer.concat([moduleBytes(), Buffer.from('\n# not the reviewed module\n')]);

interface StateResult { result: boolean | null; changes: Record<string, unknown>; comment: string }
interface Minion {
  root: string;
  tree: string;
  served: string;
  installed: string;
  call(...args: string[]): { status: number | null; local: unknown; stderr: string };
}

/**
 * A minion the production way: write_files of the cloud-init fragment under a
 * private root (module + minion.d include with its options), the master's tree
 * from the built CLI plus a top file applying client_receipts.
 */
function minion(name: string, options: { extmods?: string; install?: boolean } = {}): Minion {
  const root = join(work, name);
  const tree = join(root, 'srv');
  mkdirSync(tree, { recursive: true });
  const out = spawnSync(cli, ['file-tree', '--out', tree, '--json'], { encoding: 'utf8' });
  expect(out.status, out.stderr).toBe(0);
  const servedPath = (JSON.parse(out.stdout) as { files: Array<{ path: string }> }).files[0]?.path ?? '';
  expect(servedPath.endsWith('oduflow_job.py')).toBe(true);
  writeFileSync(join(tree, 'top.sls'), "base:\n  '*':\n    - client_receipts\n");

  const plan = planCloudInit({ minionId, masterHost: 'salt.internal' });
  for (const file of plan.files) {
    if (file.path === plan.modulePath && options.install === false) continue;
    const target = join(root, file.path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, file.content, { mode: Number.parseInt(file.permissions, 8) });
  }
  const configDir = join(root, 'etc', 'salt');
  writeFileSync(
    join(configDir, 'minion'),
    [
      `root_dir: ${JSON.stringify(root)}`,
      'file_client: local',
      `file_roots: {base: [${JSON.stringify(tree)}]}`,
      `log_file: ${JSON.stringify(join(root, 'minion.log'))}`,
      'enable_fqdns_grains: false',
      'enable_gpu_grains: false',
      '',
    ].join('\n'),
  );
  // A test-only override, read after the cloud-init include.
  if (options.extmods !== undefined) {
    writeFileSync(join(configDir, 'minion.d', 'zz-test.conf'), `extension_modules: ${JSON.stringify(options.extmods)}\n`);
  }
  const extmods = options.extmods ?? join(root, plan.extmodsDir);
  return {
    root,
    tree,
    served: join(tree, servedPath),
    installed: join(extmods, 'modules', 'oduflow_job.py'),
    call: (...args) => {
      const run = spawnSync(saltCall, ['-c', configDir, '--local', '--out=json', '--retcode-passthrough', ...args], {
        encoding: 'utf8',
        timeout: 120_000,
      });
      let local: unknown;
      try {
        local = (JSON.parse(run.stdout) as { local: unknown }).local;
      } catch {
        local = run.stdout;
      }
      return { status: run.status, local, stderr: run.stderr };
    },
  };
}

const states = (local: unknown): Record<string, StateResult> => {
  expect(local, JSON.stringify(local)).toBeTypeOf('object');
  return local as Record<string, StateResult>;
};
const byId = (local: unknown, id: string): StateResult | undefined =>
  Object.entries(states(local)).find(([key]) => key.split('_|-')[1] === id)?.[1];

describe('client_receipts with real salt-call', () => {
  // Missing prerequisites fail the suite loudly; it never skips itself.
  beforeAll(() => {
    if (!asRoot) throw new Error('these tests run salt-call as root in a private root_dir: run npm test as root');
    if (!existsSync(saltCall)) throw new Error(`no ${saltCall}: run bash scripts/ensure-python.sh (npm test does)`);
    if (!existsSync(cli)) throw new Error(`no ${cli}: build apps/minion first (npm test does)`);
  });

  it('highstate and saltutil.sync_all never install a tampered served module; client_receipts reports the digest failure', () => {
    const m = minion('tamper');
    expect(readFileSync(m.installed).equals(moduleBytes())).toBe(true);

    writeFileSync(m.served, tampered);
    const high = m.call('state.apply');
    expect(high.status).not.toBe(0);
    const digest = byId(high.local, 'oduflow_job_module_digest');
    expect(digest?.result).toBe(false);
    expect(byId(high.local, 'oduflow_job_module')?.result).toBe(false);
    expect(readFileSync(m.installed).equals(moduleBytes())).toBe(true);

    const sync = m.call('saltutil.sync_all');
    expect(sync.status, sync.stderr).toBe(0);
    expect(JSON.stringify(sync.local)).not.toContain('oduflow_job');
    // still present (clean_dynamic_modules: false) and byte-identical
    expect(readFileSync(m.installed).equals(moduleBytes())).toBe(true);
    // the served module lives outside _modules/, so no sync can copy it
    expect(existsSync(join(m.tree, '_modules'))).toBe(false);
  }, 180_000);

  it('repairs a changed install under salt-call --local with exit 0, and is a no-op when intact', () => {
    const m = minion('repair');
    const intact = m.call('state.apply', 'client_receipts');
    expect(intact.status, JSON.stringify(intact.local)).toBe(0);
    expect(byId(intact.local, 'oduflow_job_module')?.changes).toEqual({});

    writeFileSync(m.installed, Buffer.concat([moduleBytes(), Buffer.from('\n# changed on the minion\n')]));
    const repair = m.call('state.apply', 'client_receipts');
    expect(repair.status, JSON.stringify(repair.local)).toBe(0);
    expect(Object.values(states(repair.local)).every((s) => s.result === true)).toBe(true);
    expect(byId(repair.local, 'oduflow_job_module')?.changes).not.toEqual({});
    expect(readFileSync(m.installed).equals(moduleBytes())).toBe(true);
  }, 180_000);

  it('dry run (test=True) on a fresh minion reports truthfully without writing', () => {
    const fresh = minion('dry-intact');
    const intact = fresh.call('state.apply', 'client_receipts', 'test=True');
    expect(intact.status, JSON.stringify(intact.local)).toBe(0);
    expect(byId(intact.local, 'oduflow_job_module_digest')?.result).toBe(true);
    expect(byId(intact.local, 'oduflow_job_module')).toMatchObject({ result: true, changes: {} });
    expect(existsSync(join(fresh.root, 'var', 'cache', 'salt', 'minion', 'oduflow', 'oduflow_job.py.staged'))).toBe(false);

    const missing = minion('dry-missing', { install: false });
    const wouldInstall = missing.call('state.apply', 'client_receipts', 'test=True');
    expect(wouldInstall.status, JSON.stringify(wouldInstall.local)).toBe(0);
    expect(byId(wouldInstall.local, 'oduflow_job_module')?.result).toBeNull();
    expect(byId(wouldInstall.local, 'oduflow_job_module')?.comment).toContain('would install');
    expect(existsSync(missing.installed)).toBe(false);

    writeFileSync(missing.served, tampered);
    const refused = missing.call('state.apply', 'client_receipts', 'test=True');
    expect(refused.status).not.toBe(0);
    expect(byId(refused.local, 'oduflow_job_module_digest')?.result).toBe(false);
    expect(existsSync(missing.installed)).toBe(false);
  }, 180_000);

  it('quotes every rendered path: an extension_modules path containing " #x" installs there', () => {
    const m = minion('quoted', { extmods: join(work, 'quoted', 'ext #x') });
    const run = m.call('state.apply', 'client_receipts');
    expect(run.status, JSON.stringify(run.local)).toBe(0);
    expect(readFileSync(m.installed).equals(moduleBytes())).toBe(true);
    expect(existsSync(join(work, 'quoted', 'ext'))).toBe(false);
    expect(moduleSha256()).toMatch(/^[0-9a-f]{64}$/);
  }, 180_000);
});
