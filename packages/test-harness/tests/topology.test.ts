import { readFileSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { FILE_TREE_MODULE_PATH, moduleSha256, moduleVersion, verifyInstalledModule } from '@oduflow/minion-wrapper';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  Array.isArray(answer) ? answer : Object.values(answer as StateMap).map((s) => s.result);

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

  it('runs the minion with the cloud-init options: no unchecked module sync, no clean-up of the module', async () => {
    expect(existsSync(join(topo.fileRoot, '_modules', 'oduflow_job.py'))).toBe(false);
    const [answer] = await topo.saltApi({
      client: 'local',
      tgt: [id],
      tgt_type: 'list',
      fun: 'config.items',
      timeout: 20,
    });
    const opts = (answer as Record<string, Record<string, unknown>>)[id] ?? {};
    expect(opts.autoload_dynamic_modules).toBe(false);
    expect(opts.clean_dynamic_modules).toBe(false);
    expect(opts.multiprocessing).toBe(true);
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
    expect(workers).toEqual([{ jid, pid: expect.any(Number), fun: 'state.sls' }]);
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
  it('start on their own free ports, answer independently and tear down cleanly', async () => {
    const [a, b] = await Promise.all([startTopology(), startTopology()]);
    try {
      expect(new Set([...Object.values(a.ports), ...Object.values(b.ports)]).size).toBe(6);
      expect(a.dir).not.toBe(b.dir);
      const [pa, pb] = await Promise.all([a.ping(), b.ping()]);
      expect(pa).toEqual({ [a.minionIds[0] as string]: true });
      expect(pb).toEqual({ [b.minionIds[0] as string]: true });
      expect(await a.ping(b.minionIds)).toEqual({});
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(processesUnder(a.dir)).toEqual([]);
    expect(processesUnder(b.dir)).toEqual([]);
  }, 120_000);
});
