/*
 * End-to-end, part 2 (issue 5, scenarios 4, 5 and 6): real failures on a real
 * local Salt topology, with the real master runner. The salt-master, a job
 * worker and salt-api are SIGKILLed for real and started again; every
 * scenario restores what it breaks, and each uses its own minion, so one
 * topology serves them all. The side-effect marker of each minion counts how
 * many times a role really ran.
 */
import { dirname } from 'node:path';
import { dispatch, poll, publishPending, reconcile } from '@oduflow/master-runner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLE_MARKERS, processesUnder, startTopology, type Topology } from '../../src/topology.js';
import {
  RAW_OUTPUT_NEEDLES,
  asProtocol,
  createE2eMaster,
  filesContaining,
  listFiles,
  expectMinimalMinionFiles,
  minionEvidence,
  pollUntilSettled,
  scenarioTimer,
  terminalReceipt,
  waitUntil,
  type E2eMaster,
} from './support/e2e.js';
import { startLostAckProxy, type LostAckProxy } from './support/lost-ack-proxy.js';

const SLOW_STATE_SECONDS = 4;

describe('lost publications, killed workers and an unreachable salt-api on a live Salt topology', () => {
  let topo: Topology;
  let master: E2eMaster;
  let proxy: LostAckProxy | undefined;
  let viaProxy: E2eMaster | undefined;
  let minion: (index: number) => string;
  const publishesTo = (m: E2eMaster, id: string) => m.salt.publishes.filter((p) => p.minionId === id);
  /** Each scenario starts from a whole topology, even when an earlier one failed half-way. */
  const ensureRunning = async () => {
    if (topo.daemonPid('master') === null) await topo.startMaster();
    if (topo.daemonPid('api') === null) await topo.startSaltApi();
  };

  beforeAll(async () => {
    const t = scenarioTimer('topology B start (4 minions)');
    topo = await startTopology({ minions: 4, slowStateSeconds: SLOW_STATE_SECONDS, startTimeoutMs: 120_000 });
    master = await createE2eMaster(topo);
    minion = (index) => topo.minionIds[index] as string;
    t('ready');
  }, 180_000);

  afterAll(async () => {
    await viaProxy?.close();
    await proxy?.close();
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await master?.close();
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (topo !== undefined) {
      await topo.stop();
      expect(topo.leftoverProcesses()).toEqual([]);
    }
  }, 60_000);

  it('recovers the exact receipt by polling after the master died between the minion commit and the return, with no second apply', async () => {
    const done = scenarioTimer('scenario 4 lost publication (master SIGKILL after the commit)');
    await ensureRunning();
    const id = minion(0);
    expect(topo.markerLines(id)).toEqual([]);

    const result = await dispatch(master.deps, { minionId: id, profile: 'volume_resize' });
    expect(result.outcome).toBe('published');
    const rid = result.record.request_id;

    // The state has started (marker line): the minion has its SLS and needs the master no more.
    await waitUntil('the slow role to start', 30_000, () => (topo.markerLines(id).length === 1 ? true : undefined));
    await topo.stopMaster('SIGKILL');
    const committed = await waitUntil('the minion to commit its receipt with the master down', 60_000, () => terminalReceipt(topo, id, rid), 100);
    await topo.startMaster();

    // Salt lost the return: the restarted master's job cache has nothing for this JID.
    const lookup = await topo.runSaltCli(['salt-run', 'jobs.lookup_jid', asProtocol(result.record).jid, '--out=json'], { timeoutMs: 60_000 });
    expect(lookup.code).toBe(0);
    expect(JSON.parse(lookup.stdout.trim() || '{}')).toEqual({});

    const polled = await pollUntilSettled(master.deps, rid);
    expect(polled.record).toMatchObject({ state: 'succeeded', passed: 3, total: 3, jid: result.record.jid });
    const exact = {
      protocol: 1,
      minion_id: id,
      request_id: rid,
      jid: result.record.jid,
      profile: 'volume_resize',
      state_digest: '',
      status: 'succeeded',
      passed: 3,
      total: 3,
    };
    expect(committed).toEqual(exact);
    expect(terminalReceipt(topo, id, rid)).toEqual(exact);
    expect(publishesTo(master, id).map((p) => p.outcome.kind)).toEqual(['acked']);
    expect(await publishPending(master.deps)).toEqual([]);
    expect(publishesTo(master, id)).toHaveLength(1);
    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.volume_resize]);
    done('poll recovered succeeded 3/3 (exact receipt; Salt job cache empty), 1 publication, marker 1');
  }, 180_000);

  it('leaves a request whose job worker was SIGKILLed mid-state unknown and blocking, never re-applied after a minion restart, until reconciled', async () => {
    const done = scenarioTimer('scenario 5 job worker SIGKILLed mid-state');
    await ensureRunning();
    const id = minion(1);
    expect(topo.markerLines(id)).toEqual([]);

    const result = await dispatch(master.deps, { minionId: id, profile: 'volume_resize' });
    expect(result.outcome).toBe('published');
    const { request_id: rid, jid } = asProtocol(result.record);

    await waitUntil('the slow role to start', 30_000, () => (topo.markerLines(id).length === 1 ? true : undefined));
    const worker = await waitUntil('the job worker of our JID', 10_000, async () =>
      (await topo.jobWorkers(id)).find((w) => w.jid === jid && w.fun === 'oduflow_job.run'),
    );
    process.kill(worker.pid, 'SIGKILL');
    await waitUntil('the job worker to be gone', 10_000, async () => ((await topo.jobWorkers(id)).length === 0 ? true : undefined));

    const polled = await poll(master.deps, rid);
    expect(polled.observed).toMatchObject({ status: 'unknown' });
    expect(polled.record).toMatchObject({ state: 'unknown', passed: 0, total: 0 });
    // The minion holds the claim (running, no live lock) and no terminal receipt.
    expect(minionEvidence(topo, id).requests[rid]).toMatchObject({ status: 'running', jid });
    expect(terminalReceipt(topo, id, rid)).toBeUndefined();

    await expect(dispatch(master.deps, { minionId: id, profile: 'configure' })).rejects.toMatchObject({
      code: 'target_blocked',
      requestId: rid,
      detail: 'unknown',
    });

    await topo.stopMinion(id);
    await topo.startMinion(id);
    // Long enough to matter, by condition: the restarted minion answers, runs no job at all,
    // and nothing of the killed role (its sleep) is alive any more.
    const minionRoot = dirname(topo.markerFile(id));
    await waitUntil('the restarted minion to be idle with nothing of the old role alive', 60_000, async () => {
      const [answer] = await topo.saltApi({ client: 'local', tgt: [id], tgt_type: 'list', fun: 'saltutil.running', timeout: 10 });
      const running = (answer as Record<string, unknown>)[id];
      const leftovers = processesUnder(minionRoot).filter((p) => p.cmdline.startsWith('sleep'));
      return Array.isArray(running) && running.length === 0 && leftovers.length === 0 ? true : undefined;
    }, 250);
    const status = await master.salt.call(id, 'oduflow_job.status', [rid, jid, 'volume_resize', ''], 20_000);
    expect(status).toMatchObject({ kind: 'returned', retcode: 0, ret: { request_id: rid, jid, status: 'unknown', passed: 0, total: 0 } });
    const again = await poll(master.deps, rid);
    expect(again).toMatchObject({ outcome: 'not_pollable', record: { state: 'unknown' } });
    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.volume_resize]);

    const publishesBefore = master.salt.publishes.length;
    const reconciled = await reconcile(master.deps, rid, { reason: 'e2e: worker killed mid-resize; volume checked by hand', actor: 'e2e-operator' });
    expect(reconciled).toMatchObject({ state: 'reconciled', reconciliation: { actor: 'e2e-operator' } });
    expect(master.salt.publishes).toHaveLength(publishesBefore);
    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.volume_resize]);

    const next = await dispatch(master.deps, { minionId: id, profile: 'configure' });
    expect(next.outcome).toBe('published');
    const settled = await pollUntilSettled(master.deps, next.record.request_id);
    expect(settled.record).toMatchObject({ state: 'succeeded', passed: 5, total: 5 });
    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.volume_resize, ROLE_MARKERS.configure]);
    done('unknown 0/0, blocked, still unknown after minion restart (marker 1), reconciled, next configure succeeded 5/5');
  }, 180_000);

  it('keeps a publication refused by a dead salt-api prepared and publishes it later once under the same JID', async () => {
    const done = scenarioTimer('scenario 6a salt-api unreachable at publication');
    await ensureRunning();
    const id = minion(2);
    expect(topo.markerLines(id)).toEqual([]);

    // The capability check passes; salt-api dies right before the publish goes out.
    master.salt.beforeNextPublish(() => topo.stopSaltApi('SIGKILL'));
    const result = await dispatch(master.deps, { minionId: id, profile: 'configure' });
    expect(result).toMatchObject({ outcome: 'not_sent', failure: 'connection_refused' });
    expect(result.record).toMatchObject({ state: 'prepared', publish_attempts: 1, reason: { code: 'publish_not_sent', failure: 'connection_refused' } });
    const { request_id: rid, jid } = result.record;
    expect(topo.daemonPid('api')).toBeNull();
    expect(publishesTo(master, id).map((p) => p.outcome)).toEqual([{ kind: 'not_sent', reason: 'connection_refused' }]);
    expect(topo.markerLines(id)).toEqual([]);
    expect(minionEvidence(topo, id)).toEqual({ requests: {}, jids: {} });
    // prepared blocks the target: it will go out later with its reserved JID.
    await expect(dispatch(master.deps, { minionId: id, profile: 'production' })).rejects.toMatchObject({
      code: 'target_blocked',
      requestId: rid,
      detail: 'prepared',
    });

    await topo.startSaltApi();
    const pending = await publishPending(master.deps);
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({ outcome: 'published', record: { request_id: rid, jid, state: 'published', publish_attempts: 2 } });

    const polled = await pollUntilSettled(master.deps, rid);
    expect(polled.record).toMatchObject({ state: 'succeeded', passed: 5, total: 5, jid });
    expect(terminalReceipt(topo, id, rid)).toMatchObject({ jid, status: 'succeeded', passed: 5, total: 5 });
    expect(Object.keys(minionEvidence(topo, id).jids)).toEqual([jid]);
    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.configure]);

    expect(await publishPending(master.deps)).toEqual([]);
    const outcomes = publishesTo(master, id).map((p) => p.outcome.kind);
    expect(outcomes).toEqual(['not_sent', 'acked']);
    expect(new Set(publishesTo(master, id).map((p) => p.jid))).toEqual(new Set([jid]));
    done('not_sent (connection refused) → prepared, publish-pending published once with the same JID, succeeded 5/5, marker 1');
  }, 120_000);

  it('leaves a publication whose ack was lost uncertain, resolves it by polling and never publishes it twice', async () => {
    const done = scenarioTimer('scenario 6b lost ack (salt-api SIGKILLed before its answer)');
    await ensureRunning();
    const id = minion(3);
    expect(topo.markerLines(id)).toEqual([]);
    proxy = await startLostAckProxy(topo.ports.api);
    viaProxy = await createE2eMaster(topo, { url: proxy.url });

    proxy.armLostAck(() => topo.stopSaltApi('SIGKILL'));
    const result = await dispatch(viaProxy.deps, { minionId: id, profile: 'configure' });
    expect(result).toMatchObject({ outcome: 'publish_uncertain', failure: 'connection_reset' });
    await proxy.lostAckDone();
    expect(result.record).toMatchObject({ state: 'publishing', publish_attempts: 1, reason: { code: 'publish_uncertain', failure: 'connection_reset' } });
    expect(proxy.lostAcks()).toBe(1);
    expect(proxy.publications()).toBe(1);
    expect(topo.daemonPid('api')).toBeNull();
    const rid = result.record.request_id;

    // Nothing re-publishes an uncertain request: publish-pending only touches prepared ones.
    expect(await publishPending(viaProxy.deps)).toEqual([]);
    await topo.startSaltApi();
    const polled = await pollUntilSettled(viaProxy.deps, rid);
    expect(polled.record).toMatchObject({ state: 'succeeded', passed: 5, total: 5, jid: result.record.jid });
    expect(terminalReceipt(topo, id, rid)).toMatchObject({ jid: result.record.jid, status: 'succeeded' });
    expect(await publishPending(viaProxy.deps)).toEqual([]);

    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.configure]);
    expect(proxy.publications()).toBe(1);
    expect(viaProxy.salt.publishes.map((p) => p.outcome)).toEqual([{ kind: 'uncertain', reason: 'connection_reset' }]);
    done('publish_uncertain (publishing), polled to succeeded 5/5, 1 publication reached salt-api, marker 1');
  }, 120_000);

  it('keeps raw state output out of master records and logs and minion receipts, each receipt holding exactly the nine protocol keys', () => {
    const done = scenarioTimer('topology B evidence scan');
    const receiptFiles = topo.minionIds.flatMap((id) => listFiles(topo.receiptDir(id)));
    const masterFiles = [...master.files(), ...(viaProxy?.files() ?? [])];
    expect(filesContaining([...masterFiles, ...receiptFiles], RAW_OUTPUT_NEEDLES)).toEqual([]);
    const receipts = expectMinimalMinionFiles(topo);
    // b0 1, b1 2 (the killed claim and the later configure), b2 1, b3 1
    expect(receipts).toBe(5);
    done(`${masterFiles.length} master files and ${receiptFiles.length} minion files clean; ${receipts} receipts with exactly 9 keys`);
  }, 30_000);
});
