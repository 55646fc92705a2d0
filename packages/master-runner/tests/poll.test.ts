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

function minionError(code: string): CallReply {
  return { retcode: 1, ret: { protocol: 1, error: code, message: 'the minion says why, in its own words' } };
}

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
    expect(result).toMatchObject({ outcome: 'committed', observed: { status: 'succeeded' }, record: { state: 'succeeded', passed: 60, total: 60 } });
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
    expect(result.record).toMatchObject({
      state: 'quarantined',
      reason: { code: 'binding_conflict', source: 'answer' },
      last_observation: { failure: 'answer_binding_conflict' },
    });
  });

  it('quarantines when the minion itself reports a binding conflict', async () => {
    world.standIn.status = () => ({ retcode: 1, ret: { protocol: 1, error: 'binding_conflict', message: 'bound to another JID' } });
    expect((await poll(world.deps, REQUEST_A)).record).toMatchObject({
      state: 'quarantined',
      reason: { code: 'binding_conflict', source: 'minion' },
      last_observation: { error: 'binding_conflict' },
    });
  });

  it.each<[string, () => CallReply, Record<string, unknown>, Record<string, unknown>]>([
    ['an extra field', () => statusReply({ comment: 'raw output' }), { code: 'poll_failed', failure: 'invalid_status_answer' }, { failure: 'invalid_status_answer' }],
    ['succeeded with failing counts', () => statusReply({ passed: 59 }), { code: 'poll_failed', failure: 'invalid_status_answer' }, { failure: 'invalid_status_answer' }],
    ['a boolean protocol', () => statusReply({ protocol: true }), { code: 'poll_failed', failure: 'invalid_status_answer' }, { failure: 'invalid_status_answer' }],
    ['a numeric JID', () => statusReply({ jid: 20261129100000000000 }), { code: 'poll_failed', failure: 'invalid_status_answer' }, { failure: 'invalid_status_answer' }],
    ['a Salt string answer', () => ({ retcode: 1, ret: "'oduflow_job.status' is not available." }), { code: 'poll_failed', failure: 'not_a_protocol_answer' }, { failure: 'not_a_protocol_answer' }],
    ['a valid answer with retcode 1', () => ({ ...statusReply({}), retcode: 1 }), { code: 'poll_failed', failure: 'not_a_protocol_answer' }, { failure: 'not_a_protocol_answer' }],
    ['an unsafe store error', () => minionError('unsafe_store'), { code: 'minion_error', error: 'unsafe_store' }, { error: 'unsafe_store' }],
    ['a malformed store error', () => minionError('malformed_store'), { code: 'minion_error', error: 'malformed_store' }, { error: 'malformed_store' }],
    ['inconsistent evidence', () => minionError('inconsistent_evidence'), { code: 'minion_error', error: 'inconsistent_evidence' }, { error: 'inconsistent_evidence' }],
    ['an error code this master does not know', () => minionError('quota_exceeded_v3'), { code: 'minion_error', error: 'quota_exceeded_v3' }, { error: 'quota_exceeded_v3' }],
    ['an error code of the wrong shape', () => minionError('Quota Exceeded'), { code: 'poll_failed', failure: 'invalid_error_answer' }, { failure: 'invalid_error_answer' }],
    ['no answer', () => ({ noReturn: true }), { code: 'poll_failed', failure: 'no_return' }, { failure: 'no_return' }],
    ['no accepted key', () => ({ noTarget: true }), { code: 'poll_failed', failure: 'no_target' }, { failure: 'no_target' }],
    ['a 500', () => ({ httpStatus: 500 }), { code: 'poll_failed', failure: 'server_error' }, { failure: 'server_error' }],
    ['a body that is not JSON', () => ({ body: 'not json' }), { code: 'poll_failed', failure: 'malformed_response' }, { failure: 'malformed_response' }],
  ])('keeps the request unresolved and records %s as the last observation', async (_label, reply, reason, observation) => {
    world.standIn.status = reply;
    const result = await poll(world.deps, REQUEST_A);
    expect(result.record).toMatchObject({ state: 'published', reason, last_observation: observation });
    expect(result.observed).toMatchObject(observation);
    expect(await world.store.get(REQUEST_A)).toMatchObject({ last_observation: observation });
    expect(JSON.stringify(result.record)).not.toContain('raw output');
  });

  it.each([0, 1])('rejects a request the minion refused (retcode %i), keeps why, and frees the target', async (retcode) => {
    world.standIn.status = () => ({ ...statusReply({ status: 'refused', passed: 0, total: 0, reason: 'execution_busy' }), retcode });
    const result = await poll(world.deps, REQUEST_A);
    expect(result).toMatchObject({
      outcome: 'committed',
      observed: { status: 'refused', reason: 'execution_busy' },
      record: { state: 'rejected', reason: { code: 'refused', refusal: 'execution_busy' } },
    });
    world.standIn.status = (_args, _minion, simulated) => simulated;
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'production', requestId: REQUEST_B })).outcome).toBe('published');
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('quarantines a refusal bound to another JID instead of releasing the target', async () => {
    world.standIn.status = () => statusReply({ status: 'refused', passed: 0, total: 0, reason: 'execution_busy', jid: '20261129100000999999' });
    expect((await poll(world.deps, REQUEST_A)).record).toMatchObject({ state: 'quarantined', reason: { code: 'binding_conflict', source: 'answer' } });
  });

  it('records the cause of unknown', async () => {
    world.standIn.status = () => statusReply({ status: 'running', passed: 0, total: 0 });
    await poll(world.deps, REQUEST_A);
    world.standIn.status = () => statusReply({ status: 'unknown', passed: 0, total: 0 });
    expect((await poll(world.deps, REQUEST_A)).record).toMatchObject({ state: 'unknown', reason: { code: 'unknown', cause: 'status_unknown_after_running' } });
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
    expect(late).toMatchObject({ outcome: 'unchanged', observed: { status: 'running' }, record: { state: 'succeeded', passed: 60, total: 60 } });
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
