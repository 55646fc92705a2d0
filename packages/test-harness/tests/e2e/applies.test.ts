/*
 * End-to-end, part 1 (issue 5, scenarios 1, 2, 3, 8 and 9): the real master
 * runner (file store, salt-api client) against a real local Salt topology —
 * salt-master, salt-api and four salt-minions with the reviewed module
 * installed the production way. No Salt is mocked. Each scenario uses its own
 * minion(s) or leaves nothing blocking, so the topology is shared.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { dispatch, poll, reconcile, type DispatchResult } from '@oduflow/master-runner';
import { canonicalJson, stateDigest } from '@oduflow/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RENDER_ERROR_SLS, ROLE_MARKERS, startTopology, type Topology } from '../../src/topology.js';
import {
  RAW_OUTPUT_NEEDLES,
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

describe('managed applies through the real master runner on a live Salt topology', () => {
  let topo: Topology;
  let master: E2eMaster;
  let minion: (index: number) => string;
  /** Strings planted in custom states: they must never leave the minion's state run. */
  const planted: string[] = [];

  const receiptOf = (result: DispatchResult, status: string, passed: number, total: number, stateDigestValue = '') => ({
    protocol: 1,
    minion_id: result.record.minion_id,
    request_id: result.record.request_id,
    jid: result.record.jid,
    profile: (result.record as { profile: string }).profile,
    state_digest: stateDigestValue,
    status,
    passed,
    total,
  });
  const publishesTo = (id: string) => master.salt.publishes.filter((p) => p.minionId === id);

  beforeAll(async () => {
    const t = scenarioTimer('topology A start (4 minions)');
    // The production role is replaced by one that does not render (scenario 2).
    topo = await startTopology({
      minions: 4,
      slowStateSeconds: 5,
      roles: { 'roles/client_production.sls': RENDER_ERROR_SLS },
      startTimeoutMs: 120_000,
    });
    master = await createE2eMaster(topo);
    minion = (index) => topo.minionIds[index] as string;
    t('ready');
  }, 180_000);

  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await master?.close();
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (topo !== undefined) {
      await topo.stop();
      expect(topo.leftoverProcesses()).toEqual([]);
    }
  }, 60_000);

  it('applies configure once on a fresh minion and polls a succeeded receipt of 5 of 5 states', async () => {
    const done = scenarioTimer('scenario 1 configure on a fresh minion');
    const id = minion(0);
    expect(topo.markerLines(id)).toEqual([]);

    const result = await dispatch(master.deps, { minionId: id, profile: 'configure' });
    expect(result.outcome).toBe('published');
    expect(result.record).toMatchObject({ state: 'published', publish_attempts: 1 });
    expect(result.record.jid).toMatch(/^\d{20}$/);

    const polled = await pollUntilSettled(master.deps, result.record.request_id);
    expect(polled.record).toMatchObject({ state: 'succeeded', passed: 5, total: 5, jid: result.record.jid });
    expect(terminalReceipt(topo, id, result.record.request_id)).toEqual(receiptOf(result, 'succeeded', 5, 5));

    // Settled: polling again asks nothing and changes nothing; the role ran exactly once.
    expect((await poll(master.deps, result.record.request_id)).outcome).toBe('not_pollable');
    expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.configure]);
    expect(publishesTo(id).map((p) => p.outcome.kind)).toEqual(['acked']);
    done(`succeeded ${polled.record.state === 'succeeded' ? '5/5' : '?'}, marker lines ${topo.markerLines(id).length}`);
  }, 90_000);

  it('completes concurrent dispatches to three different minions independently, each once, under distinct JIDs', async () => {
    const done = scenarioTimer('scenario 9 concurrent dispatches to 3 minions');
    const ids = [minion(1), minion(2), minion(3)];
    for (const id of ids) expect(topo.markerLines(id)).toEqual([]);
    // Dispatches, store units and minion applies run concurrently; the salt-api client runs its
    // own HTTP exchanges one at a time (salt-api 3006.27 races on simultaneous requests).
    const deps = master.deps;

    const dispatched = await Promise.all(ids.map((id) => dispatch(deps, { minionId: id, profile: 'configure' })));
    expect(dispatched.map((d) => `${d.outcome}${'failure' in d ? `:${d.failure}` : ''}`)).toEqual(['published', 'published', 'published']);
    expect(new Set(dispatched.map((d) => d.record.jid)).size).toBe(3);
    expect(new Set(dispatched.map((d) => d.record.request_id)).size).toBe(3);

    const polled = await Promise.all(dispatched.map((d) => pollUntilSettled(deps, d.record.request_id)));
    polled.forEach((p, index) => {
      const d = dispatched[index] as DispatchResult;
      expect(p.record).toMatchObject({ state: 'succeeded', passed: 5, total: 5, minion_id: ids[index], jid: d.record.jid });
      expect(terminalReceipt(topo, ids[index] as string, d.record.request_id)).toEqual(receiptOf(d, 'succeeded', 5, 5));
    });
    for (const id of ids) {
      expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.configure]);
      expect(publishesTo(id)).toHaveLength(1);
    }
    done(`3 × succeeded 5/5, markers ${ids.map((id) => topo.markerLines(id).length).join('/')}, ${new Set(dispatched.map((d) => d.record.jid)).size} distinct JIDs`);
  }, 120_000);

  it('records failed with 2 of 3 for a role with a failing state, and unknown 0/0 for a role that does not render', async () => {
    const done = scenarioTimer('scenario 2 failing state and render error');
    const id = minion(1);
    const before = topo.markerLines(id);

    const credentials = await dispatch(master.deps, { minionId: id, profile: 'credentials' });
    expect(credentials.outcome).toBe('published');
    const failed = await pollUntilSettled(master.deps, credentials.record.request_id);
    expect(failed.record).toMatchObject({ state: 'failed', passed: 2, total: 3 });
    expect(terminalReceipt(topo, id, credentials.record.request_id)).toEqual(receiptOf(credentials, 'failed', 2, 3));
    expect(topo.markerLines(id)).toEqual([...before, ROLE_MARKERS.credentials]);

    // `production` is served as an SLS with a Jinja syntax error in this topology.
    const broken = await dispatch(master.deps, { minionId: id, profile: 'production' });
    expect(broken.outcome).toBe('published');
    const unknown = await pollUntilSettled(master.deps, broken.record.request_id);
    expect(unknown.record).toMatchObject({ state: 'unknown', passed: 0, total: 0 });
    expect(terminalReceipt(topo, id, broken.record.request_id)).toEqual(receiptOf(broken, 'unknown', 0, 0));
    expect(topo.markerLines(id)).toEqual([...before, ROLE_MARKERS.credentials]);

    // unknown blocks the target until an operator reconciles it; reconciling publishes nothing.
    await expect(dispatch(master.deps, { minionId: id, profile: 'configure' })).rejects.toMatchObject({
      code: 'target_blocked',
      requestId: broken.record.request_id,
      detail: 'unknown',
    });
    const publishesBefore = master.salt.publishes.length;
    const reconciled = await reconcile(master.deps, broken.record.request_id, { reason: 'e2e: render error seen, nothing ran', actor: 'e2e-operator' });
    expect(reconciled.state).toBe('reconciled');
    expect(master.salt.publishes).toHaveLength(publishesBefore);
    done(`credentials failed 2/3, render error unknown 0/0, marker +${topo.markerLines(id).length - before.length}`);
  }, 120_000);

  it('applies custom high data bound to its digest, and refuses a payload with parallel before any state work', async () => {
    const done = scenarioTimer('scenario 3 custom high data and parallel refusal');
    const id = minion(2);
    const before = topo.markerLines(id);
    const work = join(dirname(topo.markerFile(id)), 'work');
    const tag = randomUUID().slice(0, 8);
    const stateId = `oduflow_e2e_custom_state_${tag}`;
    const secret = `oduflow-e2e-secret-contents-${tag}`;
    const markerLine = `custom-${tag}`;
    planted.push(stateId, secret, markerLine);

    const text = canonicalJson({
      [stateId]: { cmd: ['run', { name: `echo ${markerLine} >> ${topo.markerFile(id)}` }, { cwd: work }] },
      [`${stateId}_file`]: { 'file.managed': [{ name: join(work, `custom-${tag}.txt`) }, { contents: secret }] },
    });
    const digest = stateDigest(text);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);

    const result = await dispatch(master.deps, { minionId: id, profile: 'custom', stateDataJson: text });
    expect(result.outcome).toBe('published');
    expect(result.record).toMatchObject({ profile: 'custom', role: 'custom', state_digest: digest });
    const polled = await pollUntilSettled(master.deps, result.record.request_id);
    expect(polled.record).toMatchObject({ state: 'succeeded', passed: 2, total: 2, state_digest: digest });
    expect(terminalReceipt(topo, id, result.record.request_id)).toEqual(receiptOf(result, 'succeeded', 2, 2, digest));
    expect(topo.markerLines(id)).toEqual([...before, markerLine]);
    // file.managed ends `contents` with a newline.
    expect(readFileSync(join(work, `custom-${tag}.txt`), 'utf8')).toBe(`${secret}\n`);

    // `parallel` anywhere in the payload: the runner refuses it before any Salt call or record.
    const parallel = canonicalJson({
      [`${stateId}_parallel`]: { cmd: ['run', { name: `echo parallel-${tag} >> ${topo.markerFile(id)}` }, { parallel: true }] },
    });
    const recordsBefore = (await master.store.list({ minionId: id })).length;
    const callsBefore = master.salt.calls.length;
    const publishesBefore = master.salt.publishes.length;
    await expect(dispatch(master.deps, { minionId: id, profile: 'custom', stateDataJson: parallel })).rejects.toMatchObject({
      code: 'invalid_input',
      detail: 'forbidden_key',
    });
    expect(await master.store.list({ minionId: id })).toHaveLength(recordsBefore);
    expect(master.salt.calls).toHaveLength(callsBefore);
    expect(master.salt.publishes).toHaveLength(publishesBefore);

    // Defence in depth: the same payload sent straight to the module is refused before any claim.
    const evidenceBefore = minionEvidence(topo, id);
    const directRequest = randomUUID();
    const [answer] = await topo.saltApi({
      client: 'local',
      tgt: [id],
      tgt_type: 'list',
      fun: 'oduflow_job.run',
      arg: [directRequest, 'custom', parallel],
      full_return: true,
      timeout: 20,
    });
    const mine = (answer as Record<string, { ret: Record<string, unknown>; retcode: number }>)[id];
    expect(mine?.retcode).toBe(1);
    expect(mine?.ret).toMatchObject({ protocol: 1, error: 'forbidden_key' });
    expect(Object.keys(mine?.ret ?? {}).sort()).toEqual(['error', 'message', 'protocol']);
    expect(minionEvidence(topo, id)).toEqual(evidenceBefore);
    expect(topo.markerLines(id)).toEqual([...before, markerLine]);
    done(`custom succeeded 2/2 bound to ${digest.slice(0, 12)}…, parallel refused (runner invalid_input/forbidden_key, module forbidden_key), marker +1`);
  }, 120_000);

  it('refuses a second dispatch while the first request is unresolved and leaves the first untouched', async () => {
    const done = scenarioTimer('scenario 8 second dispatch to a blocked target');
    const id = minion(3);
    const before = topo.markerLines(id);
    const recordsBefore = (await master.store.list({ minionId: id })).length;

    const first = await dispatch(master.deps, { minionId: id, profile: 'volume_resize' });
    expect(first.outcome).toBe('published');
    const rid = first.record.request_id;
    await expect(dispatch(master.deps, { minionId: id, profile: 'configure' })).rejects.toMatchObject({
      code: 'target_blocked',
      requestId: rid,
      detail: 'published',
    });

    // While its slow state runs, the minion says running; the target stays blocked.
    await waitUntil('the slow role to start', 30_000, () => (topo.markerLines(id).length === before.length + 1 ? true : undefined));
    const running = await poll(master.deps, rid);
    expect(running.observed).toMatchObject({ status: 'running' });
    expect(running.record.state).toBe('running');
    const stored = await master.store.get(rid);
    await expect(dispatch(master.deps, { minionId: id, profile: 'configure' })).rejects.toMatchObject({
      code: 'target_blocked',
      requestId: rid,
      detail: 'running',
    });
    expect(await master.store.get(rid)).toEqual(stored);
    expect(await master.store.list({ minionId: id })).toHaveLength(recordsBefore + 1);

    const settled = await pollUntilSettled(master.deps, rid);
    expect(settled.record).toMatchObject({ state: 'succeeded', passed: 3, total: 3, jid: first.record.jid });
    expect(terminalReceipt(topo, id, rid)).toEqual(receiptOf(first, 'succeeded', 3, 3));
    expect(topo.markerLines(id)).toEqual([...before, ROLE_MARKERS.volume_resize]);
    expect(publishesTo(id).filter((p) => p.args[0] === rid)).toHaveLength(1);
    done('second dispatch refused target_blocked (published, then running); first succeeded 3/3, marker +1');
  }, 120_000);

  it('keeps raw state output out of master records and logs and minion receipts, each receipt holding exactly the nine protocol keys', () => {
    const done = scenarioTimer('topology A evidence scan');
    const receiptFiles = topo.minionIds.flatMap((id) => listFiles(topo.receiptDir(id)));
    const masterFiles = master.files();
    expect(masterFiles.length).toBeGreaterThan(1);
    expect(readFileSync(master.logFile, 'utf8')).toContain('"request_id"');
    expect(receiptFiles.length).toBeGreaterThan(0);
    expect(filesContaining([...masterFiles, ...receiptFiles], [...RAW_OUTPUT_NEEDLES, ...planted])).toEqual([]);

    const receipts = expectMinimalMinionFiles(topo);
    expect(receipts).toBe(8);
    done(`${masterFiles.length} master files and ${receiptFiles.length} minion files clean; ${receipts} receipts with exactly 9 keys`);
  }, 30_000);
});
