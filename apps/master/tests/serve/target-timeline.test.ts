import { createRequestRecord, type ProtocolRequestRecord, type RequestState } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { timelineViolations, type TimedPublication } from './support/target-timeline.js';

/*
 * The hammer test's timeline check must be able to fail: these histories
 * are built by hand, legal ones and the illegal ones it exists to catch.
 */

const T = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const OTHER = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
const BASE = Date.parse('2026-12-02T10:00:00.000Z');
let n = 0;

function record(minionId: string, fromMs: number, state: RequestState, untilMs: number = fromMs): ProtocolRequestRecord {
  n += 1;
  const id = `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
  const created = createRequestRecord({
    request_id: id,
    minion_id: minionId,
    profile: 'configure',
    state_digest: '',
    jid: `202612021000000000${String(n).padStart(2, '0')}`,
    at: new Date(BASE + fromMs).toISOString(),
  });
  return { ...created, state, updated_at: new Date(BASE + untilMs).toISOString() } as ProtocolRequestRecord;
}

const published = (r: ProtocolRequestRecord, atMs: number): TimedPublication => ({ requestId: r.request_id, minionId: r.minion_id, at: BASE + atMs });

describe('the target timeline check', () => {
  it('accepts requests that follow each other on a target, back to back, and a rejection in between', () => {
    const first = record(T, 0, 'succeeded', 10);
    const rejected = record(T, 5, 'rejected'); // refused at admission: never held the target
    const second = record(T, 10, 'unknown', 30); // still blocking
    const elsewhere = record(OTHER, 3, 'succeeded', 8);
    expect(timelineViolations([first, rejected, second, elsewhere], [published(first, 2), published(second, 12), published(elsewhere, 4)])).toEqual([]);
  });

  it('accepts the answer that resolves a request being recorded in the millisecond it was published', () => {
    const first = record(T, 0, 'succeeded', 4);
    expect(timelineViolations([first], [published(first, 4)])).toEqual([]);
  });

  it('finds two requests holding one target at once', () => {
    const first = record(T, 0, 'succeeded', 10);
    const second = record(T, 9, 'succeeded', 20);
    expect(timelineViolations([first, second], [])).toEqual([{ kind: 'overlapping_holds', minionId: T, requestIds: [first.request_id, second.request_id] }]);
  });

  it('finds a request admitted while an earlier one still blocks (unknown, for ever)', () => {
    const stuck = record(T, 0, 'unknown', 5);
    const next = record(T, 50, 'succeeded', 60);
    expect(timelineViolations([stuck, next], []).map((v) => v.kind)).toEqual(['overlapping_holds']);
  });

  it('finds a publication that reached Salt while another request held its target', () => {
    const first = record(T, 0, 'succeeded', 10);
    const second = record(T, 10, 'succeeded', 20);
    // second's publication is recorded as arriving at 5, while first held the target
    const violations = timelineViolations([first, second], [published(first, 1), published(second, 5)]);
    expect(violations).toContainEqual({ kind: 'published_while_held', minionId: T, requestId: second.request_id, heldBy: first.request_id, at: BASE + 5 });
  });

  it('finds a publication before its request was created, after it was resolved, or of a request nobody holds', () => {
    const first = record(T, 10, 'succeeded', 20);
    const ghost: TimedPublication = { requestId: '00000000-0000-4000-8000-999999999999', minionId: T, at: BASE + 15 };
    const kinds = timelineViolations([first], [published(first, 5), published(first, 25), ghost, { ...published(first, 15), minionId: OTHER }]).map((v) => v.kind);
    expect(kinds).toEqual(['published_outside_own_hold', 'published_outside_own_hold', 'published_unknown_request', 'published_unknown_request']);
  });
});
