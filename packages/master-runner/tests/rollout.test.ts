import { closeSync, existsSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { resumeFingerprint, type CompatibilityFields } from '@oduflow/job-envelope';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MasterDeps } from '../src/deps.js';
import { dispatch } from '../src/dispatch.js';
import { MasterRunnerError } from '../src/errors.js';
import { createMasterLogger } from '../src/logger.js';
import { reconcile } from '../src/reconcile.js';
import { listRollouts, readRollout } from '../src/rollout/read-rollout.js';
import type { RolloutReport } from '../src/rollout/report.js';
import { rolloutRequestId } from '../src/rollout/request-id.js';
import { runRollout, startRollout, type RolloutOptions, type RolloutProgress } from '../src/rollout/start-rollout.js';
import type { RolloutInput } from '../src/rollout/spec.js';
import { OLD_CAPABILITIES } from './support/salt-api-standin.js';
import { makeWorld, type World } from './support/harness.js';

/*
 * Rollouts through the real library against the salt-api stand-in (a real
 * HTTP server counting every publication per request and per minion) and
 * a real file store. The SIGKILL-and-resume proofs run the real CLI in a
 * real process: apps/master/tests/rollout-crash.test.ts.
 */

let world: World;
let workspace: string;

beforeEach(async () => {
  world = await makeWorld();
  workspace = join(world.scratch, 'rollouts');
});
afterEach(async () => world.close());

const targetsOf = (n: number, prefix = '0190e6a5-1c2d-7e3f-8a4b'): string[] => Array.from({ length: n }, (_, i) => `client-${prefix}-${String(i).padStart(12, '0')}`);
const fast: Partial<RolloutOptions> = { pollIntervalMs: 10, stageTimeoutMs: 5_000 };

function rollout(input: Partial<RolloutInput> & { targets: string[] }, options: Partial<RolloutOptions> = {}, deps: MasterDeps = world.deps): Promise<RolloutReport> {
  return runRollout(deps, { profile: 'configure', ...input }, { workspace, ...fast, ...options });
}

function publicationsPerMinion(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const p of world.standIn.publications) counts.set(p.minionId, (counts.get(p.minionId) ?? 0) + 1);
  return counts;
}

async function refusalOf(promise: Promise<unknown>): Promise<MasterRunnerError> {
  try {
    await promise;
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

/** The stand-in's minions answer `status` with this for the given targets. */
function answerFor(targets: ReadonlySet<string>, status: 'failed' | 'running' | 'unknown'): void {
  world.standIn.status = (args, minionId, simulated) => {
    if (!targets.has(minionId) || !('ret' in simulated)) return simulated;
    const ret = simulated.ret as Record<string, unknown>;
    if (ret['status'] === 'not_started') return simulated;
    const counts = status === 'failed' ? { passed: 1, total: 3 } : { passed: 0, total: 0 };
    return { retcode: 0, ret: { ...ret, status, ...counts } };
  };
}

describe('a rollout against the stand-in', () => {
  it('applies every target once, batch by batch, under request ids derived from the rollout, and reports each', async () => {
    const targets = targetsOf(5);
    const events: RolloutProgress[] = [];
    const report = await rollout({ targets: [...targets].reverse(), batchSize: 2 }, { onProgress: (e) => events.push(e) });

    expect(report).toMatchObject({ status: 'succeeded', halted: null, dry_run: false, profile: 'configure', target_count: 5, batch_size: 2, budget_used: 0 });
    expect(report.counts).toMatchObject({ succeeded: 5, failed: 0, pending: 0, not_reached: 0 });
    expect(report.stages.map((s) => [s.stage_id, s.status, s.targets, s.error])).toEqual([
      ['batch-00001', 'succeeded', 2, null],
      ['batch-00002', 'succeeded', 2, null],
      ['batch-00003', 'succeeded', 1, null],
    ]);
    expect(report.targets.map((t) => t.minion_id)).toEqual(targets);
    for (const row of report.targets) {
      expect(row).toMatchObject({ outcome: 'succeeded', record_state: 'succeeded', passed: 60, total: 60, request_id: rolloutRequestId(report.rollout_id, row.minion_id) });
      expect(world.standIn.publicationsOf(row.request_id as string)).toBe(1);
      expect(await world.store.get(row.request_id as string)).toMatchObject({ state: 'succeeded', minion_id: row.minion_id });
      // Its history says the rollout created and published it.
      expect((await world.store.history(row.request_id as string))?.entries.slice(0, 3).map((e) => [e.event, e.source])).toEqual([
        ['created', 'rollout'],
        ['intent_recorded', 'rollout'],
        ['publish_acked', 'rollout'],
      ]);
    }
    expect([...publicationsPerMinion().values()]).toEqual([1, 1, 1, 1, 1]);
    expect(readRollout(workspace, report.run_id)).toEqual(report);
    expect(events.map((e) => e.kind)).toEqual(['started', 'stage_started', 'target', 'target', 'stage_finished', 'stage_started', 'target', 'target', 'stage_finished', 'stage_started', 'target', 'stage_finished', 'finished']);
    expect(events[0]).toMatchObject({ kind: 'started', targetCount: 5, stageCount: 3, runId: report.run_id, resumedFrom: null });
  });

  it('hands back its run id once the first checkpoint is durable, and shows the rollout while it runs', async () => {
    world.standIn.publishMode = 'hold';
    const handle = await startRollout(world.deps, { profile: 'configure', targets: targetsOf(2), batchSize: 2 }, { workspace, ...fast });
    expect(handle.rolloutId).toBe(handle.runId);
    const running = readRollout(workspace, handle.runId);
    expect(running).toMatchObject({ status: 'running', finished_at: null, duration_ms: null });
    expect(listRollouts(workspace)).toMatchObject([{ run_id: handle.runId, valid: true, status: 'running', stages: 1 }]);
    // A second rollout in the same workspace is refused while this one runs, before it asks anything.
    const calls = world.standIn.callCount;
    const second = await refusalOf(runRollout(world.deps, { profile: 'configure', targets: targetsOf(1, '0190e6a5-1c2d-7e3f-8a4c') }, { workspace, ...fast }));
    expect([second.code, second.detail]).toEqual(['rollout_refused', 'job_locked']);
    expect(world.standIn.callCount).toBe(calls);
    world.standIn.releaseHeld();
    const held = setInterval(() => world.standIn.releaseHeld(), 5);
    try {
      expect((await handle.done).status).toBe('succeeded');
    } finally {
      clearInterval(held);
    }
    expect(listRollouts(workspace)).toMatchObject([{ run_id: handle.runId, status: 'succeeded', stages_succeeded: 1 }]);
  });

  it('reports a blocked target and never forces it; the other targets are applied', async () => {
    const [blockedTarget, free] = targetsOf(2) as [string, string];
    answerFor(new Set([blockedTarget]), 'running');
    const first = await dispatch(world.deps, { minionId: blockedTarget, profile: 'production' });
    expect(first.outcome).toBe('published');
    world.standIn.status = (_args, _minion, simulated) => simulated;

    const report = await rollout({ targets: [blockedTarget, free] }, { stageTimeoutMs: 50 });
    expect(report.targets).toMatchObject([
      { minion_id: blockedTarget, outcome: 'blocked', reason: 'target_blocked', detail: 'published', blocked_by: first.record.request_id, record_state: null },
      { minion_id: free, outcome: 'succeeded' },
    ]);
    expect(report.status).toBe('succeeded');
    expect(publicationsPerMinion().get(blockedTarget)).toBe(1);
    expect(await world.store.get(report.targets[0]?.request_id as string)).toBeUndefined();
  });

  it('reports minions that are not ready, not reachable or unknown to Salt without recording or publishing anything for the last two', async () => {
    const [old, silent, absent, good] = targetsOf(4) as [string, string, string, string];
    world.standIn.capabilities = (id) =>
      id === old ? { retcode: 0, ret: OLD_CAPABILITIES } : id === silent ? { noReturn: true } : id === absent ? { noTarget: true } : { retcode: 0, ret: { protocol: 1, module_version: '1.1.0', salt_version: '3006.27', module_sha256: 'c0ffee00'.repeat(8), ready: true, reasons: [] } };
    const report = await rollout({ targets: [old, silent, absent, good] });
    expect(report.targets.map((t) => [t.outcome, t.reason, t.detail, t.record_state])).toEqual([
      ['rejected', 'capability_unsupported', null, 'rejected'],
      ['unreachable', 'minion_unreachable', 'no_return', null],
      ['no_target', 'no_target', null, null],
      ['succeeded', null, null, 'succeeded'],
    ]);
    expect(report.budget_used).toBe(0);
    expect(world.standIn.publications.map((p) => p.minionId)).toEqual([good]);
    expect(await world.store.get(report.targets[1]?.request_id as string)).toBeUndefined();
  });

  it('calls what is still running at the stage deadline unresolved, spends the budget on it, and halts', async () => {
    const targets = targetsOf(4);
    answerFor(new Set([targets[1] as string]), 'running');
    const report = await rollout({ targets, batchSize: 2, maxUnresolved: 0 }, { stageTimeoutMs: 200 });
    expect(report).toMatchObject({ status: 'failed', halted: 'budget_exceeded', budget_used: 1 });
    expect(report.targets.map((t) => [t.outcome, t.record_state])).toEqual([
      ['succeeded', 'succeeded'],
      ['unresolved', 'running'],
    ]);
    expect(report.counts).toMatchObject({ succeeded: 1, unresolved: 1, not_reached: 2 });
    expect(report.stages.map((s) => [s.status, s.error])).toEqual([
      ['failed', 'budget_exceeded'],
      ['pending', null],
    ]);
    expect(world.standIn.publications.map((p) => p.minionId)).toEqual(targets.slice(0, 2));
  });

  it('dispatches nothing in a dry run: it only reads blockers and asks for capabilities', async () => {
    const [blocked, notReady, free] = targetsOf(3) as [string, string, string];
    await dispatch(world.deps, { minionId: blocked, profile: 'configure' }); // published, never polled: it blocks
    const before = world.standIn.publications.length;
    const records = (await world.store.list()).length;
    world.standIn.capabilities = (id) =>
      id === notReady
        ? { retcode: 0, ret: { protocol: 1, module_version: '1.1.0', salt_version: '3006.27', module_sha256: 'c0ffee00'.repeat(8), ready: false, reasons: ['multiprocessing', 'cache_jobs'] } }
        : { retcode: 0, ret: { protocol: 1, module_version: '1.1.0', salt_version: '3006.27', module_sha256: 'c0ffee00'.repeat(8), ready: true, reasons: [] } };
    const calls = world.standIn.calls.length;

    const report = await rollout({ targets: [blocked, notReady, free], dryRun: true, maxUnresolved: 0 });
    expect(report).toMatchObject({ status: 'succeeded', dry_run: true, halted: null });
    expect(report.targets.map((t) => [t.outcome, t.reason, t.detail, t.request_id])).toEqual([
      ['blocked', 'target_blocked', 'published', null],
      ['rejected', 'not_ready', 'multiprocessing,cache_jobs', null],
      ['skipped', null, null, null],
    ]);
    expect(world.standIn.publications).toHaveLength(before);
    expect((await world.store.list()).length).toBe(records);
    // Only capability calls, and none to the blocked target.
    expect(world.standIn.calls.slice(calls).map((c) => [c.client, c.fun, c.tgt])).toEqual([
      ['local', 'oduflow_job.capabilities', [notReady]],
      ['local', 'oduflow_job.capabilities', [free]],
    ]);
    expect(readdirSync(join(world.storeRoot, 'locks')).filter((n) => n.startsWith('target-') && !n.includes(blocked))).toEqual([]);
  });

  it('resumes a rollout halted by its budget once an operator reconciled the target, without publishing to anyone twice', async () => {
    const targets = targetsOf(4);
    answerFor(new Set([targets[0] as string]), 'unknown');
    const halted = await rollout({ targets, batchSize: 2 });
    expect(halted).toMatchObject({ status: 'failed', halted: 'budget_exceeded' });
    const unknownRow = halted.targets[0];
    expect(unknownRow).toMatchObject({ outcome: 'unknown', record_state: 'unknown', reason: 'unknown', detail: 'status_unknown' });

    // The same budget, again: still exceeded, nothing published again.
    const again = await rollout({ targets, batchSize: 2 }, { resume: halted.run_id });
    expect(again).toMatchObject({ status: 'failed', halted: 'budget_exceeded', resumed_from: halted.run_id, rollout_id: halted.rollout_id });

    await reconcile(world.deps, unknownRow?.request_id as string, { reason: 'checked the host by hand', actor: 'ops' });
    const resumed = await rollout({ targets, batchSize: 2 }, { resume: again.run_id });
    expect(resumed).toMatchObject({ status: 'succeeded', halted: null, budget_used: 0, rollout_id: halted.rollout_id });
    expect(resumed.targets.map((t) => t.outcome)).toEqual(['reconciled', 'succeeded', 'succeeded', 'succeeded']);
    expect([...publicationsPerMinion().values()]).toEqual([1, 1, 1, 1]);
  });
});

describe('a custom rollout', () => {
  const PLANTED = 'planted-state-data-4f1d';
  const stateDataJson = `{"marker":{"file.managed":[{"contents":"${PLANTED}"},{"name":"/tmp/oduflow-marker"}]}}`;

  it('publishes its state data with each dispatch, stores it nowhere, and resumes only with the same data', async () => {
    const targets = targetsOf(3);
    const down: MasterDeps = { ...world.deps, salt: { ...world.salt, call: () => Promise.reject(new Error('salt-api down')) } };
    const failed = await rollout({ profile: 'custom', targets, stateDataJson }, {}, down);
    expect(failed).toMatchObject({ status: 'failed', halted: 'stage_exception' });

    const report = await rollout({ profile: 'custom', targets, stateDataJson }, { resume: failed.run_id });
    expect(report).toMatchObject({ status: 'succeeded', profile: 'custom', counts: { succeeded: 3 } });
    expect(world.standIn.publications.map((p) => p.args[2])).toEqual(targets.map(() => stateDataJson));
    const written = [...listFilesUnder(workspace), ...listFilesUnder(world.storeRoot)].map((f) => readFileSync(f, 'utf8'));
    expect(written.filter((text) => text.includes(PLANTED) || text.includes('file.managed'))).toEqual([]);
    expect(JSON.stringify(report)).not.toContain(PLANTED);
  });
});

function listFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe('a rollout of 200 targets', () => {
  it('publishes exactly once to each, and counts every outcome', async () => {
    const targets = targetsOf(200);
    const report = await rollout({ targets, batchSize: 25, maxUnresolved: 0 }, { concurrency: 8 });
    expect(report).toMatchObject({ status: 'succeeded', target_count: 200, budget_used: 0 });
    expect(report.counts).toMatchObject({ succeeded: 200, not_reached: 0, pending: 0 });
    expect(report.stages).toHaveLength(8);
    const perMinion = publicationsPerMinion();
    expect(perMinion.size).toBe(200);
    expect([...perMinion.values()].every((n) => n === 1)).toBe(true);
    expect(world.standIn.publications).toHaveLength(200);
  }, 60_000);

  it('halts after the batch where failures exceed the budget, and never publishes to the batches after it', async () => {
    const targets = targetsOf(200);
    // 2 failures in each batch of 25: the budget of 5 is exceeded in the third batch (6 > 5).
    const failing = new Set(targets.filter((_, i) => i % 25 === 3 || i % 25 === 17));
    answerFor(failing, 'failed');
    const report = await rollout({ targets, batchSize: 25, maxUnresolved: 5 });
    expect(report).toMatchObject({ status: 'failed', halted: 'budget_exceeded', budget_used: 6 });
    expect(report.stages.map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'failed', 'pending', 'pending', 'pending', 'pending', 'pending']);
    expect(report.counts).toMatchObject({ succeeded: 69, failed: 6, not_reached: 125 });
    expect(report.targets.filter((t) => t.outcome === 'failed').every((t) => t.passed === 1 && t.total === 3)).toBe(true);
    const perMinion = publicationsPerMinion();
    expect(perMinion.size).toBe(75);
    expect([...perMinion.keys()].sort()).toEqual(targets.slice(0, 75));
    expect([...perMinion.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);
});

describe('a stage whose dispatch throws', () => {
  const SECRET = 'hunter2-salt-api-password';
  const PATH = '/etc/oduflow/secret/salt-api.password';

  it('fails the stage with the fixed stage_exception code: the report and the log hold neither the message nor the path', async () => {
    const logFile = join(world.scratch, 'rollout.log');
    const fd = openSync(logFile, 'a', 0o600);
    const hostile: MasterDeps = {
      ...world.deps,
      logger: createMasterLogger({ level: 'debug', fd }),
      salt: {
        ...world.salt,
        call: (...args) => world.salt.call(...args),
        publish: () => {
          throw new Error(`connection failed: password=${SECRET} read from ${PATH}`);
        },
      },
    };
    try {
      const report = await rollout({ targets: targetsOf(3), batchSize: 2 }, {}, hostile);
      expect(report).toMatchObject({ status: 'failed', halted: 'stage_exception' });
      expect(report.stages.map((s) => [s.status, s.error])).toEqual([
        ['failed', 'stage_exception'],
        ['pending', null],
      ]);
      const text = JSON.stringify(report) + JSON.stringify(readRollout(workspace, report.run_id));
      const runDir = join(workspace, 'runs', report.run_id);
      const onDisk = readdirSync(runDir).filter((n) => n.endsWith('.json')).map((n) => readFileSync(join(runDir, n), 'utf8')).join('\n');
      const log = readFileSync(logFile, 'utf8');
      for (const haystack of [text, onDisk, log]) {
        expect(haystack).not.toContain(SECRET);
        expect(haystack).not.toContain(PATH);
        expect(haystack).not.toContain('connection failed');
      }
      expect(log).toContain('"err_type":"Error"');
      // Its intent was recorded before the publish threw: published-uncertain, never published again.
      expect(await world.store.get(rolloutRequestId(report.rollout_id, targetsOf(1)[0] as string))).toMatchObject({ state: 'publishing' });
    } finally {
      closeSync(fd);
    }
  });
});

describe('resuming a rollout with anything of its fingerprint changed', () => {
  const targets = targetsOf(4);
  const input = { profile: 'configure', targets, batchSize: 2, maxUnresolved: 0 } as const;

  async function interrupted(): Promise<string> {
    // A stage that throws leaves a failed, resumable run (the store stays as it was: nothing was dispatched).
    const throwing: MasterDeps = { ...world.deps, salt: { ...world.salt, call: () => Promise.reject(new Error('down')) } };
    const report = await runRollout(throwing, input, { workspace, ...fast });
    expect(report.status).toBe('failed');
    return report.run_id;
  }

  async function expectRefused(change: Partial<RolloutInput>, options: Partial<RolloutOptions> = {}, detail = 'resume_mismatch'): Promise<void> {
    const source = await interrupted();
    const runs = readdirSync(join(workspace, 'runs')).sort();
    const calls = world.standIn.callCount;
    const error = await refusalOf(runRollout(world.deps, { ...input, ...change }, { workspace, ...fast, resume: source, ...options }));
    expect([error.code, error.detail]).toEqual(['rollout_refused', detail]);
    expect(readdirSync(join(workspace, 'runs')).sort()).toEqual(runs);
    expect(existsSync(join(workspace, 'runs', source, 'superseded.json'))).toBe(false);
    expect(world.standIn.callCount).toBe(calls);
    expect(world.standIn.publications).toEqual([]);
  }

  it('refuses another target list', () => expectRefused({ targets: targets.slice(0, 3) }));
  it('refuses another profile', () => expectRefused({ profile: 'production' }));
  it('refuses another batch size with the same number of stages', () => expectRefused({ batchSize: 3 }));
  it('refuses another budget', () => expectRefused({ maxUnresolved: 1 }));
  it('refuses a dry run of a real rollout', () => expectRefused({ dryRun: true }));
  it('refuses another record store (workspace identity)', () => expectRefused({}, { identity: 'record-store:/somewhere/else' }));
  it('refuses custom state data of another digest', async () => {
    const custom = { profile: 'custom', stateDataJson: '{"a":{"file.touch":[{"name":"/tmp/a"}]}}' } as const;
    const throwing: MasterDeps = { ...world.deps, salt: { ...world.salt, call: () => Promise.reject(new Error('down')) } };
    const source = (await runRollout(throwing, { ...input, ...custom }, { workspace, ...fast })).run_id;
    const error = await refusalOf(runRollout(world.deps, { ...input, profile: 'custom', stateDataJson: '{"a":{"file.touch":[{"name":"/tmp/b"}]}}' }, { workspace, ...fast, resume: source }));
    expect([error.code, error.detail]).toEqual(['rollout_refused', 'resume_mismatch']);
    expect(world.standIn.publications).toEqual([]);
  });

  function tamperHeader(runId: string, change: (header: Record<string, unknown>) => void, refingerprint: boolean): void {
    const path = join(workspace, 'runs', runId, 'job.json');
    const header = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    change(header);
    if (refingerprint) header['fingerprint'] = resumeFingerprint(header as unknown as CompatibilityFields);
    writeFileSync(path, JSON.stringify(header)); // in place: the file keeps its mode and owner, only its content lies
  }

  it('refuses a stored fingerprint that does not match its own fields, as a corrupt checkpoint', async () => {
    const source = await interrupted();
    tamperHeader(source, (h) => void (h['fingerprint'] = 'f'.repeat(64)), false);
    const error = await refusalOf(runRollout(world.deps, input, { workspace, ...fast, resume: source }));
    expect([error.code, error.detail]).toEqual(['rollout_refused', 'corrupt_checkpoint']);
    expect(world.standIn.publications).toEqual([]);
  });

  it('refuses stages reordered in the stored header, with or without a recomputed fingerprint', async () => {
    for (const refingerprint of [false, true]) {
      const source = await interrupted();
      tamperHeader(source, (h) => void (h['stage_ids'] = [...(h['stage_ids'] as string[])].reverse()), refingerprint);
      expect((await refusalOf(runRollout(world.deps, input, { workspace, ...fast, resume: source }))).detail).toBe('corrupt_checkpoint');
    }
    expect(world.standIn.publications).toEqual([]);
  });

  it('refuses a stage removed from the stored header: corrupt without a new fingerprint, another job with one', async () => {
    const source = await interrupted();
    tamperHeader(source, (h) => void (h['stage_ids'] = (h['stage_ids'] as string[]).slice(0, 1)), false);
    expect((await refusalOf(runRollout(world.deps, input, { workspace, ...fast, resume: source }))).detail).toBe('corrupt_checkpoint');
    const second = await interrupted();
    tamperHeader(second, (h) => void (h['stage_ids'] = (h['stage_ids'] as string[]).slice(0, 1)), true);
    expect((await refusalOf(runRollout(world.deps, input, { workspace, ...fast, resume: second }))).detail).toBe('resume_mismatch');
    expect(world.standIn.publications).toEqual([]);
  });
});
