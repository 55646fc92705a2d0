import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CLIENT_RECEIPTS_SCHEDULE_NAME,
  DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS,
  DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS,
  FILE_TREE_MODULE_PATH,
  clientReceiptsScheduleEntry,
  moduleSha256,
  moduleVersion,
  verifyInstalledModule,
} from '@oduflow/minion-wrapper';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, watchdogScriptPath } from '../src/topology-paths.js';
import { isAlive } from '../src/topology-process.js';
import { ROLE_MARKERS, processesUnder, startTopology, type Topology } from '../src/topology.js';

const waitUntil = async (what: string, ms: number, probe: () => boolean | Promise<boolean>) => {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

type StateMap = Record<string, { result: unknown }>;
const results = (answer: unknown): unknown[] | boolean[] =>
  Array.isArray(answer) ? (answer as unknown[]) : Object.values(answer as StateMap).map((s) => s.result);

describe('a local Salt topology', () => {
  let topo: Topology;
  let id: string;
  let startupMs = 0;

  beforeAll(async () => {
    const t0 = Date.now();
    topo = await startTopology({ slowStateSeconds: 6 });
    startupMs = Date.now() - t0;
    id = topo.minionIds[0] as string;
  }, 90_000);
  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await topo?.stop();
  }, 30_000);

  it('starts a master, salt-api and a minion that answers test.ping through salt-api', async () => {
    expect(id).toMatch(/^client-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await topo.ping()).toEqual({ [id]: true });
    expect(statSync(topo.passwordFile).mode & 0o777).toBe(0o600);
    expect(topo.eauth).toBe('file');
    const password = readFileSync(topo.passwordFile, 'utf8');
    const login = await fetch(`${topo.saltApiUrl}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ username: topo.username, password, eauth: topo.eauth }),
    });
    expect(login.status).toBe(200);
    const wrong = await fetch(`${topo.saltApiUrl}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ username: topo.username, password: `${password}x`, eauth: topo.eauth }),
    });
    expect(wrong.status).toBe(401);
    await expect(topo.saltApi({ client: 'runner', fun: 'jobs.list_jobs' })).rejects.toThrow(/HTTP 400/);
    console.info(`topology start-up: ${startupMs} ms`);
  });

  it('installs the reviewed module before the minion starts, verified by digest, and the minion loads it', async () => {
    expect(topo.moduleSha256).toBe(moduleSha256());
    expect(verifyInstalledModule(topo.extmodsDir(id))).toMatchObject({ ok: true, mode: '0644' });
    const [answer] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'oduflow_job.capabilities', timeout: 20 });
    expect((answer as Record<string, unknown>)[id]).toEqual({
      protocol: 1,
      module_version: moduleVersion(),
      salt_version: '3006.27',
      module_sha256: moduleSha256(),
      ready: true,
      reasons: [],
    });
  });

  it('runs the minion with the cloud-init options: readiness, no unchecked module sync, no clean-up, a client_receipts schedule', async () => {
    expect(existsSync(join(topo.fileRoot, '_modules', 'oduflow_job.py'))).toBe(false);
    // config.items cannot serialize the opts once the scheduler has stamped its datetimes into them: one key at a time
    const keys = ['autoload_dynamic_modules', 'clean_dynamic_modules', 'multiprocessing', 'cache_jobs', 'minion_pillar_cache', 'pillar_cache', 'gpg_cache', 'sudo_user', 'module_executors'];
    const NOT_SET = 'oduflow-test-not-set';
    const answers = await topo.saltApi(
      keys.map((key) => ({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'config.get', arg: [key, NOT_SET], timeout: 20 })),
    );
    const opts = Object.fromEntries(keys.map((key, i) => [key, (answers[i] as Record<string, unknown>)[id]]));
    expect(opts).toEqual({
      autoload_dynamic_modules: false,
      clean_dynamic_modules: false,
      multiprocessing: true,
      cache_jobs: false,
      minion_pillar_cache: false,
      pillar_cache: false,
      gpg_cache: false,
      sudo_user: '',
      module_executors: NOT_SET,
    });
    // the running minion's scheduler holds the entry (schedule.list asks the daemon)
    const [listed] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'schedule.list', kwarg: { return_yaml: false }, timeout: 20 });
    expect((listed as Record<string, Record<string, unknown>>)[id]?.[CLIENT_RECEIPTS_SCHEDULE_NAME]).toEqual({
      ...clientReceiptsScheduleEntry(DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS, DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS),
      name: CLIENT_RECEIPTS_SCHEDULE_NAME,
      enabled: true,
    });
  });

  it('keeps the module managed with client_receipts and fails closed when the master serves other bytes', async () => {
    const installed = join(topo.extmodsDir(id), 'modules', 'oduflow_job.py');
    const served = join(topo.fileRoot, FILE_TREE_MODULE_PATH);
    const reviewed = readFileSync(served);
    const moduleState = (states: Record<string, { changes: unknown }>) =>
      Object.entries(states).find(([key]) => key.startsWith('file_|-oduflow_job_module_|-'))?.[1];

    expect(moduleState((await topo.applyClientReceipts())[id] ?? {})?.changes).toEqual({});

    writeFileSync(installed, Buffer.concat([reviewed, Buffer.from('\n# changed on the minion\n')]));
    expect(moduleState((await topo.applyClientReceipts())[id] ?? {})?.changes).not.toEqual({});
    expect(readFileSync(installed).equals(reviewed)).toBe(true);

    writeFileSync(served, Buffer.concat([reviewed, Buffer.from('\n# not the reviewed module\n')]));
    writeFileSync(installed, Buffer.concat([reviewed, Buffer.from('\n# changed again\n')]));
    const before = readFileSync(installed);
    await expect(topo.applyClientReceipts()).rejects.toThrow(/client_receipts failed/);
    expect(readFileSync(installed).equals(before)).toBe(true);

    writeFileSync(served, reviewed);
    await topo.applyClientReceipts();
    expect(verifyInstalledModule(topo.extmodsDir(id)).ok).toBe(true);
  }, 60_000);

  it('serves test roles that succeed, fail or do not render, each run appending one marker line', async () => {
    const apply = async (role: string) => {
      const [answer] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'state.sls', arg: [role], timeout: 30 });
      return (answer as Record<string, unknown>)[id];
    };
    const before = topo.markerLines(id).length;
    expect(results(await apply('roles.client_stack'))).toEqual([true, true, true, true, true]);
    expect(results(await apply('roles.client_production'))).toEqual([true, true, true, true]);
    expect((results(await apply('roles.client_credentials')) as unknown[]).filter((r) => r === false)).toHaveLength(1);
    const broken = await apply('roles.render_error');
    expect(Array.isArray(broken)).toBe(true);
    expect(topo.markerLines(id).slice(before)).toEqual([ROLE_MARKERS.configure, ROLE_MARKERS.production, ROLE_MARKERS.credentials]);
  }, 60_000);

  it('finds the job worker of a slow state so a test can SIGKILL it mid-state', async () => {
    const before = topo.markerLines(id).length;
    const [published] = await topo.saltApi({ client: 'local_async', tgt: [id], tgt_type: 'list', fun: 'state.sls', arg: ['roles.client_storage_resize'] });
    const jid = (published as { jid: string }).jid;
    await waitUntil('the slow state to start', 15_000, () => topo.markerLines(id).length === before + 1);
    const workers = await topo.jobWorkers(id);
    expect(workers).toEqual([{ jid, pid: expect.any(Number) as unknown, fun: 'state.sls' }]);
    const [worker] = workers;
    process.kill(worker?.pid as number, 'SIGKILL');
    await waitUntil('the worker to die', 5_000, async () => (await topo.jobWorkerPids(id)).length === 0);
    expect(topo.markerLines(id).slice(before)).toEqual([ROLE_MARKERS.volume_resize]);
  }, 30_000);

  it('stops and restarts the master, salt-api and the minion by pid', async () => {
    await topo.stopMaster('SIGKILL');
    expect(topo.daemonPid('master')).toBeNull();
    await topo.startMaster();
    await topo.stopMinion(id, 'SIGKILL');
    await topo.startMinion(id);
    await topo.stopSaltApi();
    await topo.startSaltApi();
    expect(await topo.ping()).toEqual({ [id]: true });
  }, 90_000);

  it('tears everything down and leaves no process behind', async () => {
    const dir = topo.dir;
    await topo.stop();
    expect(processesUnder(dir)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
  }, 30_000);
});

describe('two topologies side by side', () => {
  it('start on their own free ports, answer independently, take per-minion options and tear down cleanly', async () => {
    const [a, b] = await Promise.all([
      startTopology({ minionOptions: { oduflow_test_option: 'everywhere', cache_jobs: true } }),
      startTopology({ minions: 2, minionOptions: (id) => ({ oduflow_test_option: id }) }),
    ]);
    try {
      expect(new Set([...Object.values(a.ports), ...Object.values(b.ports)]).size).toBe(6);
      expect(a.dir).not.toBe(b.dir);
      const [pa, pb] = await Promise.all([a.ping(), b.ping()]);
      expect(pa).toEqual({ [a.minionIds[0] as string]: true });
      expect(pb).toEqual(Object.fromEntries(b.minionIds.map((id) => [id, true])));
      expect(await a.ping(b.minionIds)).toEqual({});
      // the options are read after the cloud-init include: they win where they overlap, the rest stays
      const option = async (t: Topology, key: string) => {
        const [answer] = await t.saltApi({ client: 'local', tgt: t.minionIds, tgt_type: 'list', fun: 'config.get', arg: [key], timeout: 20 });
        return answer;
      };
      const aId = a.minionIds[0] as string;
      expect(await option(a, 'oduflow_test_option')).toEqual({ [aId]: 'everywhere' });
      expect(await option(a, 'cache_jobs')).toEqual({ [aId]: true });
      expect(await option(a, 'multiprocessing')).toEqual({ [aId]: true });
      expect(await option(b, 'oduflow_test_option')).toEqual(Object.fromEntries(b.minionIds.map((id) => [id, id])));
      expect(await option(b, 'cache_jobs')).toEqual(Object.fromEntries(b.minionIds.map((id) => [id, false])));
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(processesUnder(a.dir)).toEqual([]);
    expect(processesUnder(b.dir)).toEqual([]);
  }, 120_000);
});

describe('the topology watchdog (python/topology_watchdog.py)', () => {
  it('is shipped in the package and kills a topology\'s processes by pid once its parent dies, then removes the directory', async () => {
    const manifest = JSON.parse(readFileSync(join(watchdogScriptPath(), '..', '..', 'package.json'), 'utf8')) as { files: string[] };
    expect(manifest.files).toContain('python');
    const dir = mkdtempSync(join(tmpdir(), 'oduflow-watchdog-test-'));
    const python = join(repoRoot(), '.venv', 'bin', 'python');
    // a stand-in for the test worker, and a stand-in for a topology process (cwd inside the dir)
    const parent = spawn('sleep', ['300'], { stdio: 'ignore' });
    mkdirSync(join(dir, 'work'));
    const orphan = spawn('sleep', ['300'], { cwd: join(dir, 'work'), stdio: 'ignore', detached: true });
    const watchdog = spawn(python, [watchdogScriptPath(), String(parent.pid), dir, '1'], { stdio: 'ignore', detached: true });
    const alive = (pid: number | undefined) => pid !== undefined && isAlive(pid);
    try {
      await waitUntil('the stand-in to show as a topology process', 10_000, () => processesUnder(dir).some((p) => p.pid === orphan.pid));
      expect([alive(orphan.pid), alive(watchdog.pid)]).toEqual([true, true]);
      parent.kill('SIGKILL');
      await waitUntil('the orphan to be killed', 15_000, () => !alive(orphan.pid));
      await waitUntil('the directory to be removed', 15_000, () => !existsSync(dir));
      await waitUntil('the watchdog to exit', 15_000, () => !alive(watchdog.pid));
    } finally {
      for (const child of [parent, orphan, watchdog]) if (child.exitCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
