import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MasterRunnerError } from '../src/errors.js';
import { listRollouts, readRollout } from '../src/rollout/read-rollout.js';
import { runRollout, startRollout, type RolloutOptions } from '../src/rollout/start-rollout.js';
import { makeWorld, type World } from './support/harness.js';

/*
 * What a long-lived caller (the HTTP service) needs of rollouts beyond the
 * CLI: a rollout id it chose (derived from an Idempotency-Key), and a signal
 * that stops a running rollout the way a crash would — without the crash —
 * so a restart resumes it.
 */

let world: World;
let workspace: string;

beforeEach(async () => {
  world = await makeWorld();
  workspace = join(world.scratch, 'rollouts');
});
afterEach(async () => world.close());

const targetsOf = (n: number): string[] => Array.from({ length: n }, (_, i) => `client-0190e6a5-1c2d-7e3f-8a4b-${String(i).padStart(12, '0')}`);
const fast: Partial<RolloutOptions> = { pollIntervalMs: 10, stageTimeoutMs: 10_000 };

async function refusalOf(promise: Promise<unknown>): Promise<MasterRunnerError> {
  try {
    await promise;
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} not reached before the deadline`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('a rollout under an id its caller chose', () => {
  it('runs under that id and refuses the id a second time', async () => {
    const rolloutId = '0190e6a5-1c2d-8e3f-8a4b-5c6d7e8f9a0b';
    const report = await runRollout(world.deps, { profile: 'configure', targets: targetsOf(2) }, { workspace, rolloutId, ...fast });
    expect(report).toMatchObject({ rollout_id: rolloutId, run_id: rolloutId, status: 'succeeded' });
    const again = await refusalOf(runRollout(world.deps, { profile: 'configure', targets: targetsOf(2) }, { workspace, rolloutId, ...fast }));
    expect([again.code, again.detail]).toEqual(['rollout_refused', 'invalid_argument']);
    expect(world.standIn.publications).toHaveLength(2);
  });

  it('refuses an id that is not a canonical UUID before anything is written', async () => {
    const refused = await refusalOf(startRollout(world.deps, { profile: 'configure', targets: targetsOf(1) }, { workspace, rolloutId: 'mine' }));
    expect([refused.code, refused.detail]).toEqual(['invalid_input', 'invalid_rollout_option']);
    expect(listRollouts(workspace)).toEqual([]);
  });
});

describe('a rollout stopped by its signal', () => {
  it('finishes the publication in flight, records nothing more, reads interrupted, and resumes without publishing to anyone twice', async () => {
    const targets = targetsOf(6);
    const controller = new AbortController();
    world.standIn.publishMode = 'hold';
    const handle = await startRollout(world.deps, { profile: 'configure', targets, batchSize: 3 }, { workspace, signal: controller.signal, concurrency: 1, ...fast });
    await until(() => world.standIn.publications.length === 1, 'the first publication was sent');
    controller.abort();
    // The publication in flight is answered after the abort: the stage waits for it and records it.
    world.standIn.releaseHeld();
    const stopped = await refusalOf(handle.done);
    expect([stopped.code, stopped.detail]).toEqual(['rollout_interrupted', 'aborted']);
    expect(world.standIn.publications).toHaveLength(1);
    const first = world.standIn.publications[0];
    const record = await world.store.get(String(first?.args[0]));
    expect(record?.state).toBe('published');

    const left = readRollout(workspace, handle.runId);
    expect(left).toMatchObject({ status: 'interrupted', finished_at: null });
    expect(left.stages.map((s) => s.status)).toEqual(['running', 'pending']);
    expect(left.targets.filter((t) => t.request_id === first?.args[0])).toMatchObject([{ record_state: 'published' }]);

    world.standIn.publishMode = 'ack';
    const resumed = await runRollout(world.deps, { profile: 'configure', targets, batchSize: 3 }, { workspace, resume: handle.runId, ...fast });
    expect(resumed).toMatchObject({ status: 'succeeded', rollout_id: handle.rolloutId, resumed_from: handle.runId });
    expect(resumed.counts.succeeded).toBe(6);
    const perMinion = new Map<string, number>();
    for (const p of world.standIn.publications) perMinion.set(p.minionId, (perMinion.get(p.minionId) ?? 0) + 1);
    expect([...perMinion.keys()].sort()).toEqual(targets);
    expect([...perMinion.values()]).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it('stops a batch that is polling at once, without waiting for the stage deadline', async () => {
    const controller = new AbortController();
    // The minions keep answering running: without the abort, the batch would poll until its deadline.
    world.standIn.status = (_args, _minion, simulated) => {
      if (!('ret' in simulated)) return simulated;
      const ret = simulated.ret as Record<string, unknown>;
      return ret['status'] === 'not_started' ? simulated : { retcode: 0, ret: { ...ret, status: 'running', passed: 0, total: 0 } };
    };
    const handle = await startRollout(
      world.deps,
      { profile: 'configure', targets: targetsOf(2) },
      { workspace, signal: controller.signal, pollIntervalMs: 60_000, stageTimeoutMs: 3_600_000 },
    );
    await until(() => world.standIn.calls.some((c) => c.fun === 'oduflow_job.status'), 'the batch polls');
    const started = Date.now();
    controller.abort();
    expect((await refusalOf(handle.done)).code).toBe('rollout_interrupted');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(readRollout(workspace, handle.runId).status).toBe('interrupted');
  });
});
