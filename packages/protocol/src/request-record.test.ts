import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { StatusAnswer } from './answers.js';
import { ProtocolError } from './errors.js';
import {
  applyEvent,
  createRequestRecord,
  isBlocking,
  isPollable,
  isTerminal,
  REQUEST_STATES,
  type LegacyRequestRecord,
  type ProtocolRequestRecord,
  type RequestEvent,
  type RequestRecord,
} from './request-record.js';
import { codeOf } from '../tests/support.js';

const T0 = '2026-11-29T10:00:00.000Z';
const T1 = '2026-11-29T10:00:01.000Z';
const T2 = '2026-11-29T10:00:02.000Z';

const base = createRequestRecord({
  request_id: '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f',
  minion_id: 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b',
  profile: 'configure',
  state_digest: '',
  jid: '20261129100000000000',
  at: T0,
});

function answer(status: StatusAnswer['status'], passed = 0, total = 0): StatusAnswer {
  return {
    protocol: 1,
    minion_id: base.minion_id,
    request_id: base.request_id,
    jid: base.jid,
    profile: base.profile,
    state_digest: base.state_digest,
    status,
    passed,
    total,
  } as StatusAnswer;
}

function run(record: RequestRecord, ...events: RequestEvent[]): RequestRecord {
  return events.reduce<RequestRecord>((r, e) => applyEvent(r, e), record);
}


const intent: RequestEvent = { type: 'intent_recorded', at: T1 };
const ack: RequestEvent = { type: 'publish_acked', at: T1 };
const seen = (status: StatusAnswer['status'], passed = 0, total = 0): RequestEvent => ({
  type: 'observed',
  at: T2,
  answer: answer(status, passed, total),
});

describe('createRequestRecord', () => {
  it('starts prepared with the fixed role, no attempts and no result', () => {
    expect(base).toMatchObject({ protocol: 1, state: 'prepared', role: 'roles.client_stack', publish_attempts: 0, passed: 0, total: 0 });
    expect(base.created_at).toBe(T0);
  });

  it('names the custom role for custom high data', () => {
    const custom = createRequestRecord({ ...base, profile: 'custom', state_digest: 'a'.repeat(64), at: T0 });
    expect(custom.role).toBe('custom');
  });
});

describe('applyEvent', () => {
  it('moves prepared through publishing to published and counts the attempt', () => {
    const published = run(base, intent, ack) as ProtocolRequestRecord;
    expect(published.state).toBe('published');
    expect(published.publish_attempts).toBe(1);
    expect(published.updated_at).toBe(T1);
  });

  it('never records a second publish intent for a request in publishing', () => {
    expect(codeOf(() => run(base, intent, intent))).toBe('illegal_transition');
  });

  it('keeps publishing with the reason when the publication is uncertain', () => {
    const uncertain = run(base, intent, { type: 'publish_uncertain', at: T1, reason: 'publish_timeout' }) as ProtocolRequestRecord;
    expect(uncertain.state).toBe('publishing');
    expect(uncertain.reason).toBe('publish_timeout');
  });

  it('returns to prepared with the same JID only when nothing was sent', () => {
    const back = run(base, intent, { type: 'publish_not_sent', at: T1, reason: 'connection_refused' }) as ProtocolRequestRecord;
    expect(back.state).toBe('prepared');
    expect(back.jid).toBe(base.jid);
    const again = run(back, intent) as ProtocolRequestRecord;
    expect(again.publish_attempts).toBe(2);
  });

  it('refuses a not-sent report once the request is published', () => {
    expect(codeOf(() => run(base, intent, ack, { type: 'publish_not_sent', at: T2, reason: 'x' }))).toBe('illegal_transition');
  });

  it('keeps a published request published-uncertain when the minion says not_started', () => {
    const r = run(base, intent, seen('not_started')) as ProtocolRequestRecord;
    expect(r.state).toBe('publishing');
    expect(r.last_observation).toEqual({ status: 'not_started', at: T2 });
    expect(codeOf(() => applyEvent(r, intent))).toBe('illegal_transition');
  });

  it('keeps running when a later poll says not_started', () => {
    const r = run(base, intent, ack, seen('running'), seen('not_started'));
    expect(r.state).toBe('running');
  });

  it('keeps a committed terminal receipt when a later poll says running', () => {
    const done = run(base, intent, ack, seen('succeeded', 60, 60));
    expect(applyEvent(done, seen('running'))).toBe(done);
    expect(applyEvent(done, seen('failed', 1, 60))).toBe(done);
    expect(done).toMatchObject({ state: 'succeeded', passed: 60, total: 60 });
  });

  it('absorbs a late ack after the minion already answered', () => {
    const r = run(base, intent, seen('running'));
    expect(applyEvent(r, ack)).toBe(r);
  });

  it('rejects a prepared request whose capability check failed and does not block its target', () => {
    const r = run(base, { type: 'capability_failed', at: T1, reason: 'capability_missing' });
    expect(r.state).toBe('rejected');
    expect(isBlocking(r)).toBe(false);
    expect(isTerminal(r)).toBe(true);
  });

  it('quarantines on a conflict and keeps it until an operator reconciles', () => {
    const q = run(base, intent, ack, { type: 'conflict', at: T2, reason: 'binding_conflict' });
    expect(q.state).toBe('quarantined');
    expect(applyEvent(q, seen('succeeded', 1, 1))).toBe(q);
    const r = applyEvent(q, { type: 'reconciled', at: T2, reason: 'checked by hand', actor: 'ops' });
    expect(r).toMatchObject({ state: 'reconciled', reconciliation: { reason: 'checked by hand', actor: 'ops', at: T2 } });
    expect(isBlocking(r)).toBe(false);
  });

  it('keeps unknown until an operator reconciles', () => {
    const u = run(base, intent, ack, seen('unknown'));
    expect(u.state).toBe('unknown');
    expect(isBlocking(u)).toBe(true);
    expect(applyEvent(u, seen('succeeded', 2, 2))).toBe(u);
  });

  it('records the reason of a failed poll without changing the state', () => {
    const r = run(base, intent, ack, { type: 'poll_failed', at: T2, reason: 'status_timeout' }) as ProtocolRequestRecord;
    expect(r).toMatchObject({ state: 'published', reason: 'status_timeout' });
  });

  it('refuses an observation bound to another JID', () => {
    const other = { ...answer('succeeded', 1, 1), jid: '20261129100000000001' } as StatusAnswer;
    expect(codeOf(() => applyEvent(run(base, intent), { type: 'observed', at: T2, answer: other }))).toBe('binding_conflict');
  });

  it('refuses to reconcile a terminal result', () => {
    const done = run(base, intent, ack, seen('failed', 3, 4));
    expect(codeOf(() => applyEvent(done, { type: 'reconciled', at: T2, reason: 'x', actor: 'ops' }))).toBe('illegal_transition');
  });

  it('lets an operator cancel a prepared request', () => {
    expect(applyEvent(base, { type: 'reconciled', at: T1, reason: 'cancelled', actor: 'ops' }).state).toBe('reconciled');
  });

  it('allows nothing but reconciliation on a legacy record', () => {
    const legacy: LegacyRequestRecord = {
      protocol: null,
      request_id: base.request_id,
      minion_id: base.minion_id,
      jid: null,
      state: 'legacy',
      reconciliation: null,
      legacy_fields: { status: 'dispatched' },
    };
    expect(isBlocking(legacy)).toBe(true);
    expect(codeOf(() => applyEvent(legacy, seen('succeeded', 1, 1)))).toBe('illegal_transition');
    const r = applyEvent(legacy, { type: 'reconciled', at: T1, reason: 'old run verified', actor: 'ops' });
    expect(r).toMatchObject({ state: 'reconciled', legacy_fields: { status: 'dispatched' } });
  });
});

describe('applyEvent over random event sequences', () => {
  const at = fc.constantFrom(T0, T1, T2);
  const reason = fc.constantFrom('a', 'b');
  const status = fc.constantFrom<StatusAnswer['status']>('not_started', 'running', 'unknown', 'succeeded', 'failed');
  const event: fc.Arbitrary<RequestEvent> = fc.oneof(
    at.map((t) => ({ type: 'intent_recorded', at: t }) as const),
    at.map((t) => ({ type: 'publish_acked', at: t }) as const),
    fc.record({ type: fc.constant('publish_uncertain' as const), at, reason }),
    fc.record({ type: fc.constant('publish_not_sent' as const), at, reason }),
    fc.record({ type: fc.constant('capability_failed' as const), at, reason }),
    fc.record({ type: fc.constant('poll_failed' as const), at, reason }),
    fc.record({ type: fc.constant('conflict' as const), at, reason }),
    fc.record({ type: fc.constant('reconciled' as const), at, reason, actor: fc.constant('ops') }),
    fc.tuple(at, status).map(([t, s]) => seen(s, s === 'succeeded' ? 3 : s === 'failed' ? 1 : 0, s === 'succeeded' || s === 'failed' ? 3 : 0)).map((e) => ({ ...e, at: T2 })),
  );

  /** Applies events, skipping refused ones, and reports every step. */
  function walk(events: RequestEvent[], visit: (before: RequestRecord, e: RequestEvent, after: RequestRecord) => void): void {
    let record: RequestRecord = base;
    for (const e of events) {
      let after: RequestRecord;
      try {
        after = applyEvent(record, e);
      } catch (error) {
        if (ProtocolError.isInstance(error) && error.code === 'illegal_transition') continue;
        throw error;
      }
      visit(record, e, after);
      record = after;
    }
  }

  const params = { numRuns: 2000, seed: 20261129 };

  it('never leaves a terminal state', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 25 }), (events) => {
        walk(events, (before, _e, after) => {
          if (isTerminal(before)) expect(after).toBe(before);
        });
      }),
      params,
    );
  });

  it('never re-enters prepared once a publication may have left, except through publish_not_sent', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 25 }), (events) => {
        let mayBeOut = false;
        walk(events, (before, e, after) => {
          if (after.state === 'prepared' && before.state !== 'prepared') expect(e.type).toBe('publish_not_sent');
          if (before.state !== 'prepared' && before.state !== 'publishing' && before.state !== 'rejected') mayBeOut = true;
          if (mayBeOut) expect(after.state).not.toBe('prepared');
        });
      }),
      params,
    );
  });

  it('re-enters publishing only from prepared', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 25 }), (events) => {
        walk(events, (before, e, after) => {
          if (e.type === 'intent_recorded') expect(before.state).toBe('prepared');
          if (after.state === 'publishing' && before.state !== 'publishing') expect(before.state).toBe('prepared');
        });
      }),
      params,
    );
  });

  it('keeps isBlocking, isTerminal and isPollable consistent with each other', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 25 }), (events) => {
        walk(events, (_b, _e, after) => {
          expect(REQUEST_STATES).toContain(after.state);
          if (isTerminal(after)) expect(isBlocking(after)).toBe(false);
          if (isPollable(after)) expect(isBlocking(after)).toBe(true);
          if (!isTerminal(after)) expect(isBlocking(after)).toBe(true);
        });
      }),
      params,
    );
  });

  it('changes a result count only while the result is open', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 25 }), (events) => {
        walk(events, (before, _e, after) => {
          if (before.state === 'succeeded' || before.state === 'failed' || before.state === 'unknown') {
            expect(after.protocol === 1 && before.protocol === 1 && after.passed === before.passed && after.total === before.total).toBe(true);
          }
        });
      }),
      params,
    );
  });
});
