import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dispatch } from '../src/dispatch.js';
import { pollAll, sweep } from '../src/poll.js';
import { startPoller } from '../src/poller.js';
import type { CallReply } from './support/salt-api-standin.js';
import { makeWorld, type World } from './support/harness.js';

const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;

async function waitFor(condition: () => boolean | Promise<boolean>, deadlineMs = 5_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error('condition not met before the deadline');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Lets every pending I/O callback and timer of 0 ms run a few times. */
async function settleEventLoop(): Promise<void> {
  for (let i = 0; i < 20; i += 1) await new Promise((resolve) => setImmediate(resolve));
}

function answer(args: readonly unknown[], minionId: string, status: string, passed = 0, total = 0): CallReply {
  const [request_id, jid, profile, state_digest] = args;
  return { retcode: 0, ret: { protocol: 1, minion_id: minionId, request_id, jid, profile, state_digest, status, passed, total } };
}

let world: World;
const N = 12;

beforeEach(async () => {
  world = await makeWorld();
  for (let n = 1; n <= N; n += 1) {
    const result = await dispatch(world.deps, { minionId: minion(n), profile: 'configure', requestId: requestId(n) });
    expect(result.outcome).toBe('published');
  }
});
afterEach(async () => {
  world.salt.close();
  await world.close();
});

const statusCalls = () => world.standIn.calls.filter((c) => c.fun === 'oduflow_job.status');

describe('sweep', () => {
  it('has at most `concurrency` status calls in flight and asks about every waiting request once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    world.standIn.status = (_args, _minion, simulated) => ({ after: gate, reply: simulated });
    const running = sweep(world.deps, { concurrency: 4 });
    await waitFor(() => statusCalls().length === 4);
    await settleEventLoop();
    expect(statusCalls()).toHaveLength(4);
    release();
    expect(await running).toEqual({ seen: N, polled: N, committed: N, unchanged: 0, errors: 0 });
    expect(new Set(statusCalls().map((c) => c.args[0])).size).toBe(N);
    for (let n = 1; n <= N; n += 1) expect((await world.store.get(requestId(n)))?.state).toBe('succeeded');
  });

  it('sends several status calls in one salt-api exchange and records each answer on its own record', async () => {
    world.standIn.status = (args, minionId) =>
      args[0] === requestId(3) ? answer(args, minionId, 'running') : answer(args, minionId, 'succeeded', 60, 60);
    const summary = await sweep(world.deps, { concurrency: 2, batchSize: 4 });
    expect(summary).toMatchObject({ polled: N, committed: N });
    expect(world.standIn.batches).toBe(N / 4);
    // One chunk per minion, each with only its own request's arguments.
    for (const call of statusCalls()) expect(call.tgt).toEqual([minion(Number.parseInt(String(call.args[0]).slice(-12), 16))]);
    expect((await world.store.get(requestId(3)))?.state).toBe('running');
    expect((await world.store.get(requestId(4)))?.state).toBe('succeeded');
  });

  it('does not rewrite a record when the minion says what the record already says', async () => {
    world.standIn.status = (args, minionId) => answer(args, minionId, 'running');
    expect(await sweep(world.deps)).toMatchObject({ committed: N, unchanged: 0 });
    const before = (await world.store.get(requestId(1))) as ProtocolRequestRecord;
    const results = await pollAll(world.deps);
    expect(results.map((r) => r.outcome)).toEqual(Array(N).fill('unchanged'));
    // The poll saw it later; the record keeps when the answer last changed.
    expect(results[0]?.observed?.at).not.toBe(before.last_observation?.at);
    expect(await world.store.get(requestId(1))).toEqual(before);
  });

  it('records an answer that changed after unchanged ones, and an error the first time it appears', async () => {
    world.standIn.status = (args, minionId) => answer(args, minionId, 'running');
    await sweep(world.deps);
    await sweep(world.deps);
    world.standIn.status = () => ({ retcode: 1, ret: { protocol: 1, error: 'unsafe_store', message: 'the store is not safe' } });
    expect(await sweep(world.deps)).toMatchObject({ committed: N });
    expect(await world.store.get(requestId(2))).toMatchObject({ state: 'running', last_observation: { error: 'unsafe_store' } });
    expect(await sweep(world.deps)).toMatchObject({ committed: 0, unchanged: N });
    world.standIn.status = (_args, _minion, simulated) => simulated;
    expect(await sweep(world.deps)).toMatchObject({ committed: N });
    expect(await world.store.get(requestId(2))).toMatchObject({ state: 'succeeded', passed: 60, total: 60 });
  });

  it('retries a status call salt-api answered 500 (its .root_key race) and records the answer', async () => {
    const failedOnce = new Set<unknown>();
    world.standIn.status = (args, _minion, simulated) => {
      if (failedOnce.has(args[0])) return simulated;
      failedOnce.add(args[0]);
      return { httpStatus: 500 };
    };
    expect(await sweep(world.deps, { concurrency: 8 })).toMatchObject({ committed: N });
    expect(statusCalls()).toHaveLength(2 * N);
    expect(world.standIn.publications).toHaveLength(N);
  });

  it('gives up on a status call after its bounded retries and records the failure, never a publication', async () => {
    world.standIn.status = () => ({ httpStatus: 500 });
    await sweep(world.deps);
    expect(statusCalls()).toHaveLength(3 * N); // the call and its two retries
    expect(await world.store.get(requestId(1))).toMatchObject({ state: 'published', last_observation: { failure: 'server_error' } });
    expect(world.standIn.publications).toHaveLength(N);
  });
});

describe('the poller loop', () => {
  it('polls what it finds, backs off on requests that keep running, and stops on abort', async () => {
    world.standIn.status = (args, minionId) => answer(args, minionId, 'running');
    const controller = new AbortController();
    const polls: string[] = [];
    const sweeps: number[] = [];
    const poller = startPoller(world.deps, {
      signal: controller.signal,
      concurrency: 4,
      minIntervalMs: 60_000,
      walkEveryMs: 3_600_000,
      metrics: { onPoll: (outcome, observed) => polls.push(`${outcome}:${String(observed)}`), onSweep: (summary) => sweeps.push(summary.polled) },
    });
    await waitFor(() => sweeps.length === 1);
    expect(sweeps).toEqual([N]);
    expect(polls).toEqual(Array(N).fill('committed:running'));
    // Everything is scheduled a minute out: no second poll happens now.
    await settleEventLoop();
    expect(statusCalls()).toHaveLength(N);
    controller.abort();
    await poller.done;
  });

  it('polls a request it is told about before the next walk', async () => {
    const controller = new AbortController();
    const sweeps: number[] = [];
    const poller = startPoller(world.deps, { signal: controller.signal, walkEveryMs: 3_600_000, metrics: { onSweep: (s) => sweeps.push(s.polled) } });
    await waitFor(() => sweeps.length === 1);
    const fresh = await dispatch(world.deps, { minionId: minion(100), profile: 'configure', requestId: requestId(100) });
    expect(fresh.outcome).toBe('published');
    poller.watch(requestId(100));
    await waitFor(async () => (await world.store.get(requestId(100)))?.state === 'succeeded');
    controller.abort();
    await poller.done;
  });

  it('abandons the calls in flight when aborted and records nothing for them', async () => {
    world.standIn.status = () => ({ hang: true });
    const controller = new AbortController();
    const inFlight: number[] = [];
    const poller = startPoller(world.deps, { signal: controller.signal, concurrency: 3, metrics: { onInFlight: (n) => inFlight.push(n) } });
    await waitFor(() => statusCalls().length === 3);
    expect(Math.max(...inFlight)).toBe(3);
    controller.abort();
    await poller.done;
    expect(inFlight.at(-1)).toBe(0);
    for (let n = 1; n <= N; n += 1) expect(await world.store.get(requestId(n))).toMatchObject({ state: 'published', last_observation: null });
  });
});
