import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dispatch } from '../src/dispatch.js';
import { poll, pollAll } from '../src/poll.js';
import type { CallReply } from './support/salt-api-standin.js';
import { MINION, OTHER_MINION, REQUEST_A, REQUEST_B, makeWorld, type World } from './support/harness.js';

async function waitFor(condition: () => boolean, deadlineMs = 5_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('condition not met before the deadline');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

let world: World;
let record: ProtocolRequestRecord;

beforeEach(async () => {
  world = await makeWorld();
  record = (await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).record as ProtocolRequestRecord;
});
afterEach(async () => {
  await world.close();
});

function statusReply(overrides: Record<string, unknown>): CallReply {
  return {
    retcode: 0,
    ret: {
      protocol: 1,
      minion_id: record.minion_id,
      request_id: record.request_id,
      jid: record.jid,
      profile: record.profile,
      state_digest: record.state_digest,
      status: 'succeeded',
      passed: 60,
      total: 60,
      ...overrides,
    },
  };
}

describe('poll', () => {
  it('asks status on exactly the record minion with its exact binding and commits the receipt', async () => {
    const result = await poll(world.deps, REQUEST_A);
    expect(result).toMatchObject({ outcome: 'committed', observed: 'succeeded', record: { state: 'succeeded', passed: 60, total: 60 } });
    const statusCall = world.standIn.calls.find((c) => c.fun === 'oduflow_job.status');
    expect(statusCall).toEqual({ client: 'local', fun: 'oduflow_job.status', tgt: [MINION], tgtType: 'list', args: [REQUEST_A, record.jid, 'configure', ''] });
  });

  it('commits running and later the terminal result', async () => {
    world.standIn.status = () => statusReply({ status: 'running', passed: 0, total: 0 });
    expect((await poll(world.deps, REQUEST_A)).record.state).toBe('running');
    world.standIn.status = () => statusReply({ status: 'failed', passed: 57, total: 60 });
    expect((await poll(world.deps, REQUEST_A)).record).toMatchObject({ state: 'failed', passed: 57, total: 60 });
  });

  it('keeps a published request published-uncertain when the minion says not_started', async () => {
    world.standIn.status = () => statusReply({ status: 'not_started', passed: 0, total: 0 });
    const result = await poll(world.deps, REQUEST_A);
    expect(result.record).toMatchObject({ state: 'published', last_observation: { status: 'not_started' } });
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it.each([
    ['another request', { request_id: REQUEST_B }],
    ['another JID', { jid: '20261129100000999999' }],
    ['another profile', { profile: 'production' }],
    ['another digest', { profile: 'custom', state_digest: 'a'.repeat(64) }],
    ['another minion', { minion_id: OTHER_MINION }],
  ])('quarantines on an answer bound to %s', async (_label, overrides) => {
    world.standIn.status = () => statusReply(overrides);
    const result = await poll(world.deps, REQUEST_A);
    expect(result.record).toMatchObject({ state: 'quarantined', reason: 'answer_binding_conflict' });
  });

  it('quarantines when the minion itself reports a binding conflict', async () => {
    world.standIn.status = () => ({ retcode: 1, ret: { protocol: 1, error: 'binding_conflict', message: 'bound to another JID' } });
    expect((await poll(world.deps, REQUEST_A)).record).toMatchObject({ state: 'quarantined', reason: 'minion_binding_conflict' });
  });

  it.each<[string, () => CallReply, string]>([
    ['an extra field', () => statusReply({ comment: 'raw output' }), 'status_invalid_status_answer'],
    ['succeeded with failing counts', () => statusReply({ passed: 59 }), 'status_invalid_status_answer'],
    ['a boolean protocol', () => statusReply({ protocol: true }), 'status_invalid_status_answer'],
    ['a numeric JID', () => statusReply({ jid: 20261129100000000000 }), 'status_invalid_status_answer'],
    ['a Salt string answer', () => ({ retcode: 1, ret: "'oduflow_job.status' is not available." }), 'status_not_a_protocol_answer'],
    ['an unsafe store refusal', () => ({ retcode: 1, ret: { protocol: 1, error: 'unsafe_store', message: 'store is unsafe' } }), 'minion_error_unsafe_store'],
    ['no answer', () => ({ noReturn: true }), 'status_no_return'],
    ['a 500', () => ({ httpStatus: 500 }), 'status_server_error'],
    ['a body that is not JSON', () => ({ body: 'not json' }), 'status_malformed_response'],
  ])('keeps the request unresolved with the reason recorded on %s', async (_label, reply, reason) => {
    world.standIn.status = reply;
    const result = await poll(world.deps, REQUEST_A);
    expect(result.record).toMatchObject({ state: 'published', reason });
    expect(JSON.stringify(result.record)).not.toContain('raw output');
  });

  it('does not ask the minion about a settled request', async () => {
    await poll(world.deps, REQUEST_A);
    const calls = world.standIn.calls.length;
    expect((await poll(world.deps, REQUEST_A)).outcome).toBe('not_pollable');
    expect(world.standIn.calls).toHaveLength(calls);
  });

  it('keeps the terminal result when two pollers race and the slower one saw running', async () => {
    let releaseSlow: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    let statusCalls = 0;
    world.standIn.status = (_args, _minion, simulated) => {
      statusCalls += 1;
      return statusCalls === 1 ? { after: gate, reply: statusReply({ status: 'running', passed: 0, total: 0 }) } : simulated;
    };
    const slow = poll(world.deps, REQUEST_A);
    await waitFor(() => statusCalls === 1);
    const fast = await poll(world.anotherWorker(), REQUEST_A);
    expect(fast).toMatchObject({ outcome: 'committed', record: { state: 'succeeded' } });
    releaseSlow();
    const late = await slow;
    expect(late).toMatchObject({ outcome: 'unchanged', observed: 'running', record: { state: 'succeeded', passed: 60, total: 60 } });
    expect((await world.store.get(REQUEST_A))?.state).toBe('succeeded');
  });

  it('commits a terminal result once when two pollers fetch it at the same time', async () => {
    const results = await Promise.all([poll(world.deps, REQUEST_A), poll(world.anotherWorker(), REQUEST_A)]);
    expect(results.map((r) => r.outcome).sort()).toEqual(['committed', 'unchanged']);
    expect(results.every((r) => r.record.state === 'succeeded')).toBe(true);
  });

  it('polls every waiting request and only those', async () => {
    await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'production', requestId: REQUEST_B });
    const results = await pollAll(world.deps);
    expect(results.map((r) => [r.record.request_id, r.record.state])).toEqual([
      [REQUEST_B, 'succeeded'],
      [REQUEST_A, 'succeeded'],
    ]);
    expect(await pollAll(world.deps)).toEqual([]);
  });
});
