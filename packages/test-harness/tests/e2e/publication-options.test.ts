/*
 * End-to-end (issue 8 §1–§3, module 1.1.0): nothing a publication carries
 * changes a managed apply, a minion that is not ready says so, and a role
 * with a parallel state never starts. Every publication goes through the live
 * salt-api (`local_async` under a JID of ours) to a real salt-master and
 * minion; the minion's receipt store and side-effect marker are read after
 * Salt has recorded the job's return, and must hold exactly what the wire
 * contract allows: a refusal record at most, never a claim or a receipt.
 */
import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_PRODUCTION_SLS, startTopology, type Topology } from '../../src/topology.js';
import { minionEvidence, scenarioTimer, waitUntil } from './support/e2e.js';

const REFUSED_KEYS = ['jid', 'minion_id', 'passed', 'profile', 'protocol', 'reason', 'request_id', 'state_digest', 'status', 'total'];

let jidSequence = 0;
/** A fresh 20-digit JID of ours (`%Y%m%d%H%M%S` + six digits), unique in this run. */
function newJid(): string {
  const now = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
  jidSequence += 1;
  return `${now}${String(900_000 + jidSequence).padStart(6, '0')}`;
}

interface JobResult {
  ret: unknown;
  retcode: unknown;
}

describe('publication options, readiness and parallel roles on a live Salt topology', () => {
  let topo: Topology;
  let minion: (index: number) => string;

  beforeAll(async () => {
    const t = scenarioTimer('topology E start (2 minions)');
    topo = await startTopology({ minions: 2, startTimeoutMs: 120_000 });
    minion = (index) => topo.minionIds[index] as string;
    t('ready');
  }, 180_000);

  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (topo !== undefined) {
      await topo.stop();
      expect(topo.leftoverProcesses()).toEqual([]);
    }
  }, 60_000);

  /** `oduflow_job.run` published once under `jid`, with `extra` merged into the salt-api low state. */
  const publishRun = async (id: string, requestId: string, jid: string, extra: Record<string, unknown> = {}, profile = 'configure') => {
    const [answer] = await topo.saltApi({
      client: 'local_async',
      tgt: [id],
      tgt_type: 'list',
      fun: 'oduflow_job.run',
      arg: [requestId, profile, ''],
      jid,
      ...extra,
    });
    expect(answer).toMatchObject({ jid, minions: [id] });
  };

  /** The job's return as the master recorded it (Salt's own job cache), once it is there. */
  const jobResult = (id: string, jid: string): Promise<JobResult> =>
    waitUntil(`the return of job ${jid}`, 60_000, async () => {
      const listed = await topo.runSaltCli(['salt-run', 'jobs.list_job', jid, '--out=json'], { timeoutMs: 60_000 });
      if (listed.code !== 0) return undefined;
      const job = JSON.parse(listed.stdout) as { Result?: Record<string, { return?: unknown; retcode?: unknown }> };
      const mine = job.Result?.[id];
      return mine === undefined ? undefined : { ret: mine.return, retcode: mine.retcode };
    }, 250);

  const status = async (id: string, requestId: string, jid: string, profile = 'configure') => {
    const [answer] = await topo.saltApi({
      client: 'local',
      tgt: [id],
      tgt_type: 'list',
      fun: 'oduflow_job.status',
      arg: [requestId, jid, profile, ''],
      timeout: 20,
      full_return: true,
    });
    return (answer as Record<string, { ret: unknown; retcode: number }>)[id];
  };

  const capabilities = async (id: string) => {
    const [answer] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'oduflow_job.capabilities', timeout: 20, full_return: true });
    return (answer as Record<string, { ret: Record<string, unknown>; retcode: number }>)[id];
  };

  const refusedAnswer = (id: string, requestId: string, jid: string, reason: string, profile = 'configure') => ({
    protocol: 1,
    minion_id: id,
    request_id: requestId,
    jid,
    profile,
    state_digest: '',
    status: 'refused',
    passed: 0,
    total: 0,
    reason,
  });

  /** The evidence on disk is what it was, plus exactly this refusal record and its JID index. */
  const expectOnlyTheRefusal = (id: string, before: ReturnType<typeof minionEvidence>, refused: ReturnType<typeof refusedAnswer>) => {
    const after = minionEvidence(topo, id);
    const { status: _s, passed: _p, total: _t, reason: _r, ...index } = refused;
    expect(after).toEqual({
      requests: { ...before.requests, [refused.request_id]: refused },
      jids: { ...before.jids, [refused.jid]: index },
    });
    expect(Object.keys(after.requests[refused.request_id] ?? {}).sort()).toEqual(REFUSED_KEYS);
  };

  const REFUSED_WITH_A_RECORD: Array<[string, Record<string, unknown>]> = [
    ['module_executors ["direct_call"]', { module_executors: ['direct_call'] }],
    ['module_executors ["splay", "direct_call"]', { module_executors: ['splay', 'direct_call'], executor_opts: { splaytime: 1 } }],
    ['executor_opts', { executor_opts: { splaytime: 30 } }],
    ['a non-empty ret', { ret: 'nosuchreturner' }],
    ['metadata', { metadata: { ticket: 'OPS-1' } }],
    ['kwarg {"__pub_x": "1"}', { kwarg: { __pub_x: '1' } }],
    ['kwarg {"test": true}', { kwarg: { test: true } }],
    ['kwarg {"queue": true}', { kwarg: { queue: true } }],
    ['kwarg {"saltenv": "base"}', { kwarg: { saltenv: 'base' } }],
    ['kwarg {"pillar": {...}}', { kwarg: { pillar: { client_secret: 'x' } } }],
  ];

  it.each(REFUSED_WITH_A_RECORD)('refuses a publication with %s for good: a refusal record, no claim, marker unchanged', async (_label, extra) => {
    const id = minion(0);
    const marker = topo.markerLines(id);
    const before = minionEvidence(topo, id);
    const requestId = randomUUID();
    const jid = newJid();

    await publishRun(id, requestId, jid, extra);
    const refused = refusedAnswer(id, requestId, jid, 'forbidden_option');
    expect(await jobResult(id, jid)).toEqual({ ret: refused, retcode: 1 });
    expectOnlyTheRefusal(id, before, refused);
    expect(await status(id, requestId, jid)).toMatchObject({ ret: refused, retcode: 0 });
    expect(topo.markerLines(id)).toEqual(marker);
  }, 120_000);

  it.each([
    ['module_executors ["sudo"] (the executor is not loaded without sudo_user)', { module_executors: ['sudo'] }],
    ['module_executors ["splay"] alone (no executor ever calls the function)', { module_executors: ['splay'], executor_opts: { splaytime: 1 } }],
  ])('leaves nothing at all for %s', async (_label, extra) => {
    const id = minion(0);
    const marker = topo.markerLines(id);
    const before = minionEvidence(topo, id);
    const requestId = randomUUID();
    const jid = newJid();

    await publishRun(id, requestId, jid, extra);
    const result = await jobResult(id, jid);
    expect(result.ret === null || typeof result.ret === 'string').toBe(true);
    expect(minionEvidence(topo, id)).toEqual(before);
    expect((await status(id, requestId, jid))?.ret).toMatchObject({ status: 'not_started', request_id: requestId, jid });
    expect(topo.markerLines(id)).toEqual(marker);
  }, 120_000);

  it('refuses a role with one parallel state before any of its states runs, and releases nothing else', async () => {
    const done = scenarioTimer('parallel role refused (production with one parallel state)');
    const id = minion(0);
    const marker = topo.markerLines(id);
    const before = minionEvidence(topo, id);
    topo.setRole(
      'roles/client_production.sls',
      `${CLIENT_PRODUCTION_SLS}
client_production_in_parallel:
  test.succeed_without_changes:
    - parallel: True
`,
    );
    try {
      const requestId = randomUUID();
      const jid = newJid();
      await publishRun(id, requestId, jid, {}, 'production');
      const refused = refusedAnswer(id, requestId, jid, 'parallel_refused', 'production');
      expect(await jobResult(id, jid)).toEqual({ ret: refused, retcode: 1 });
      expectOnlyTheRefusal(id, before, refused);
      expect((await status(id, requestId, jid, 'production'))?.ret).toEqual(refused);
      expect(topo.markerLines(id)).toEqual(marker);
    } finally {
      topo.setRole('roles/client_production.sls', CLIENT_PRODUCTION_SLS);
    }

    // The role without the parallel state applies normally afterwards.
    const requestId = randomUUID();
    const jid = newJid();
    await publishRun(id, requestId, jid, {}, 'production');
    expect(await jobResult(id, jid)).toMatchObject({ ret: { status: 'succeeded', request_id: requestId }, retcode: 0 });
    expect(topo.markerLines(id)).toEqual([...marker, 'roles.client_production']);
    done('refused parallel_refused with no state run, then applied once without it');
  }, 180_000);

  it('reports a minion with cache_jobs on as not ready, and its run refuses with not_ready', async () => {
    const done = scenarioTimer('minion configured not ready (cache_jobs: True)');
    const id = minion(1);
    const ready = await capabilities(id);
    expect(ready?.retcode).toBe(0);
    expect(ready?.ret).toMatchObject({ protocol: 1, module_version: '1.1.1', salt_version: '3006.27', module_sha256: topo.moduleSha256, ready: true, reasons: [] });

    const extra = join(topo.minionConfigDir(id), 'minion.d', 'zz-oduflow-e2e-not-ready.conf');
    writeFileSync(extra, 'cache_jobs: True\n', { mode: 0o600 });
    try {
      await topo.stopMinion(id);
      await topo.startMinion(id);
      const notReady = await capabilities(id);
      expect(notReady).toMatchObject({ retcode: 0, ret: { ready: false, reasons: ['cache_jobs'], module_sha256: topo.moduleSha256 } });
      expect(Object.keys(notReady?.ret ?? {}).sort()).toEqual(['module_sha256', 'module_version', 'protocol', 'ready', 'reasons', 'salt_version']);

      const marker = topo.markerLines(id);
      const before = minionEvidence(topo, id);
      const requestId = randomUUID();
      const jid = newJid();
      await publishRun(id, requestId, jid);
      const refused = refusedAnswer(id, requestId, jid, 'not_ready');
      expect(await jobResult(id, jid)).toEqual({ ret: refused, retcode: 1 });
      expectOnlyTheRefusal(id, before, refused);
      expect(topo.markerLines(id)).toEqual(marker);
    } finally {
      rmSync(extra, { force: true });
      await topo.stopMinion(id);
      await topo.startMinion(id);
    }
    expect((await capabilities(id))?.ret).toMatchObject({ ready: true, reasons: [] });
    done('ready → not ready [cache_jobs] → run refused not_ready → ready again');
  }, 180_000);
});
