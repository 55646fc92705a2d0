import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dispatch } from '../src/dispatch.js';
import { startEventRecorder, type IgnoredEvent } from '../src/event-recorder.js';
import { pollAll } from '../src/poll.js';
import { MINION, OTHER_MINION, REQUEST_A, REQUEST_B, makeWorld, type World } from './support/harness.js';

async function waitFor(condition: () => boolean | Promise<boolean>, deadlineMs = 5_000): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error('condition not met before the deadline');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

let world: World;
let controller: AbortController;
let recorded: string[];
let ignored: IgnoredEvent[];
let reconnects: string[];
let durations: number[];
let done: Promise<void>;

beforeEach(async () => {
  world = await makeWorld();
  controller = new AbortController();
  recorded = [];
  ignored = [];
  reconnects = [];
  durations = [];
  done = startEventRecorder(world.deps, {
    signal: controller.signal,
    source: world.salt,
    minBackoffMs: 5,
    maxBackoffMs: 20,
    metrics: {
      onRecorded: (o, ms) => {
        recorded.push(o);
        durations.push(ms);
      }, onIgnored: (why) => ignored.push(why), onReconnect: (why) => reconnects.push(why) },
  }).done;
  await waitFor(() => world.standIn.eventStreams === 1);
});
afterEach(async () => {
  controller.abort();
  await done;
  world.salt.close();
  await world.close();
});

const statusCalls = () => world.standIn.calls.filter((c) => c.fun === 'oduflow_job.status');

function returnEvent(record: ProtocolRequestRecord, ret: unknown, overrides: Record<string, unknown> = {}) {
  return {
    tag: `salt/job/${record.jid}/ret/${record.minion_id}`,
    data: { cmd: '_return', id: record.minion_id, jid: record.jid, fun: 'oduflow_job.run', fun_args: [], return: ret, retcode: 0, success: true, ...overrides },
  };
}

function receipt(record: ProtocolRequestRecord, overrides: Record<string, unknown> = {}) {
  const { minion_id, request_id, jid, profile, state_digest } = record;
  return { protocol: 1, minion_id, request_id, jid, profile, state_digest, status: 'succeeded', passed: 60, total: 60, ...overrides };
}

/** A published request whose return the stand-in does not send by itself. */
async function quietlyPublished(requestId = REQUEST_A, minionId = MINION): Promise<ProtocolRequestRecord> {
  world.standIn.returnEvents = false;
  const result = await dispatch(world.deps, { minionId, profile: 'configure', requestId });
  expect(result.outcome).toBe('published');
  return result.record as ProtocolRequestRecord;
}

describe('event-stream recorder', () => {
  it('records a run return the moment it arrives, with no status call', async () => {
    const result = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    await waitFor(async () => (await world.store.get(REQUEST_A))?.state === 'succeeded');
    expect(await world.store.get(REQUEST_A)).toMatchObject({ state: 'succeeded', passed: 60, total: 60, last_observation: { status: 'succeeded' } });
    expect(result.outcome).toBe('published');
    expect(statusCalls()).toEqual([]);
    expect(recorded).toEqual(['committed']);
    // How long the commit took after the event arrived (the service's event-to-record metric).
    expect(durations).toHaveLength(1);
    expect(durations[0]).toBeGreaterThan(0);
    expect(durations[0]).toBeLessThan(5_000);
  });

  it('records a refusal returned by run and frees the target', async () => {
    world.standIn.result = { status: 'refused', passed: 0, total: 0, reason: 'execution_busy' };
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    await waitFor(async () => (await world.store.get(REQUEST_A))?.state === 'rejected');
    expect(await world.store.get(REQUEST_A)).toMatchObject({ reason: { code: 'refused', refusal: 'execution_busy' } });
  });

  it.each<[string, (r: ProtocolRequestRecord) => { tag: string; data: unknown }, IgnoredEvent]>([
    ['a return for a JID this store does not hold', (r) => returnEvent({ ...r, jid: '20261129100000999999' }, receipt({ ...r, jid: '20261129100000999999' })), 'unknown_jid'],
    ['a return from another minion', (r) => returnEvent({ ...r, minion_id: OTHER_MINION }, receipt(r)), 'other_minion'],
    ['an answer with an extra field', (r) => returnEvent(r, receipt(r, { comment: 'raw output' })), 'not_a_status_answer'],
    ['an answer bound to another request', (r) => returnEvent(r, receipt(r, { request_id: REQUEST_B })), 'not_a_status_answer'],
    ['an error answer', (r) => returnEvent(r, { protocol: 1, error: 'already_claimed', message: 'claimed' }, { retcode: 1 }), 'not_a_status_answer'],
    ['a Salt-level string', (r) => returnEvent(r, "'oduflow_job.run' is not available.", { retcode: 1 }), 'not_a_status_answer'],
    ['a receipt with retcode 1', (r) => returnEvent(r, receipt(r), { retcode: 1 }), 'not_a_status_answer'],
    ['another function', (r) => returnEvent(r, receipt(r), { fun: 'oduflow_job.status' }), 'other_function'],
    ['a tag and data that disagree', (r) => returnEvent(r, receipt(r), { id: OTHER_MINION }), 'malformed'],
    ['a job announcement', (r) => ({ tag: `salt/job/${r.jid}/new`, data: { jid: r.jid, minions: [r.minion_id] } }), 'not_a_return'],
  ])('ignores %s and leaves the request to the poller', async (_label, event, why) => {
    const record = await quietlyPublished();
    world.standIn.emit(event(record));
    await waitFor(() => ignored.length === 1);
    expect(ignored).toEqual([why]);
    expect(await world.store.get(REQUEST_A)).toEqual(record);
    expect(JSON.stringify(await world.store.get(REQUEST_A))).not.toContain('raw output');
  });

  it('never changes a terminal result with a later return', async () => {
    const record = await quietlyPublished();
    world.standIn.emit(returnEvent(record, receipt(record)));
    await waitFor(() => recorded.length === 1);
    world.standIn.emit(returnEvent(record, receipt(record, { status: 'failed', passed: 3 })));
    await waitFor(() => recorded.length === 2);
    expect(recorded).toEqual(['committed', 'unchanged']);
    expect(await world.store.get(REQUEST_A)).toMatchObject({ state: 'succeeded', passed: 60 });
  });

  it('loses nothing when the stream is cut mid-run: the poller finds the missed return, the stream comes back', async () => {
    world.standIn.eventsStatus = 503;
    world.standIn.dropEventStreams();
    await waitFor(() => reconnects.length >= 2);
    // Published and returned while no stream is open: nobody hears the return.
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect((await world.store.get(REQUEST_A))?.state).toBe('published');
    expect((await pollAll(world.deps)).map((r) => r.record.state)).toEqual(['succeeded']);
    world.standIn.eventsStatus = undefined;
    await waitFor(() => world.standIn.eventStreams === 1);
    expect(reconnects.slice(0, 2)).toEqual(['connection_reset', 'server_error']);
    await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B });
    await waitFor(async () => (await world.store.get(REQUEST_B))?.state === 'succeeded');
  });

  it('logs in again when salt-api no longer knows the stream token', async () => {
    const logins = world.standIn.logins;
    world.standIn.dropTokens();
    world.standIn.dropEventStreams();
    await waitFor(() => world.standIn.eventStreams === 1 && world.standIn.logins > logins);
    expect(reconnects).toContain('unauthorized');
  });
});
