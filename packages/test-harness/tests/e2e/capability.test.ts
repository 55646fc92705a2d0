/*
 * End-to-end, part 3 (issue 5, scenario 7): the master refuses to publish to
 * a client that cannot prove protocol 1. Two real topologies side by side:
 * one whose minion never received the module, one whose minion runs an older
 * module (tests/e2e/support/legacy_oduflow_job.py: capabilities answers
 * protocol 0, and its `run` would apply the role without a receipt — so a
 * publication that slipped through would show as a marker line).
 */
import { fileURLToPath } from 'node:url';
import { dispatch } from '@oduflow/master-runner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileSha256, startTopology, type Topology } from '../../src/topology.js';
import { createE2eMaster, listFiles, scenarioTimer, type E2eMaster } from './support/e2e.js';

const LEGACY_MODULE = fileURLToPath(new URL('./support/legacy_oduflow_job.py', import.meta.url));

describe('capability check before publication on live Salt minions', () => {
  let bare: Topology | undefined;
  let legacy: Topology | undefined;
  let bareMaster: E2eMaster;
  let legacyMaster: E2eMaster;

  beforeAll(async () => {
    const t = scenarioTimer('topologies C (no module) and D (older module) start');
    const started = await Promise.allSettled([
      startTopology({ installModule: false, startTimeoutMs: 120_000 }),
      startTopology({ moduleSource: LEGACY_MODULE, startTimeoutMs: 120_000 }),
    ]);
    if (started[0].status === 'fulfilled') bare = started[0].value;
    if (started[1].status === 'fulfilled') legacy = started[1].value;
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    bareMaster = await createE2eMaster(bare as Topology);
    legacyMaster = await createE2eMaster(legacy as Topology);
    t('ready');
  }, 180_000);

  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await bareMaster?.close();
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await legacyMaster?.close();
    await Promise.all([bare?.stop(), legacy?.stop()]);
    expect(bare?.leftoverProcesses() ?? []).toEqual([]);
    expect(legacy?.leftoverProcesses() ?? []).toEqual([]);
  }, 60_000);

  it('rejects a dispatch to a minion without the module and publishes nothing', async () => {
    const done = scenarioTimer('scenario 7a minion without the module');
    const topo = bare as Topology;
    const id = topo.minionIds[0] as string;
    expect(topo.moduleSha256).toBeNull();

    const result = await dispatch(bareMaster.deps, { minionId: id, profile: 'configure' });
    expect(result).toMatchObject({ outcome: 'rejected', rejection: { code: 'capability_missing' } });
    expect(result.record).toMatchObject({ state: 'rejected', publish_attempts: 0, reason: { code: 'capability_missing' } });
    expect(bareMaster.salt.publishes).toEqual([]);
    expect(bareMaster.salt.calls.map((c) => c.fun)).toEqual(['oduflow_job.capabilities']);

    // rejected does not block: a later dispatch is checked again (and refused again).
    const again = await dispatch(bareMaster.deps, { minionId: id, profile: 'configure' });
    expect(again).toMatchObject({ outcome: 'rejected', rejection: { code: 'capability_missing' } });
    expect(again.record.request_id).not.toBe(result.record.request_id);
    expect(bareMaster.salt.publishes).toEqual([]);
    expect(topo.markerLines(id)).toEqual([]);
    expect(listFiles(topo.receiptDir(id))).toEqual([]);
    done('rejected capability_missing twice (not blocking), 0 publications, marker 0');
  }, 90_000);

  it('rejects a dispatch to a minion with an older module that reports protocol 0 and publishes nothing', async () => {
    const done = scenarioTimer('scenario 7b minion with an older module');
    const topo = legacy as Topology;
    const id = topo.minionIds[0] as string;
    expect(topo.moduleSha256).toBe(fileSha256(LEGACY_MODULE));

    // The minion really runs the older module: it answers, with protocol 0.
    const capabilities = await legacyMaster.salt.call(id, 'oduflow_job.capabilities', [], 20_000);
    expect(capabilities).toMatchObject({ kind: 'returned', retcode: 0, ret: { protocol: 0, module_version: '0.9.0' } });

    for (const profile of ['configure', 'volume_resize']) {
      const result = await dispatch(legacyMaster.deps, { minionId: id, profile });
      expect(result).toMatchObject({ outcome: 'rejected', rejection: { code: 'capability_unsupported' } });
      expect(result.record).toMatchObject({ state: 'rejected', publish_attempts: 0 });
    }
    expect(legacyMaster.salt.publishes).toEqual([]);
    expect(topo.markerLines(id)).toEqual([]);
    expect(listFiles(topo.receiptDir(id))).toEqual([]);
    done('rejected capability_unsupported (protocol 0), 0 publications, marker 0');
  }, 90_000);
});
