import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { StatusAnswer } from './answers.js';
import { ProtocolError } from './errors.js';
import {
  isBlocking,
  isPollable,
  isTerminal,
  REQUEST_STATES,
  RequestRecordSchema,
  type LegacyRequestRecord,
  type ProtocolRequestRecord,
  type RequestRecord,
} from './request-record.js';
import { POLL_FAILURES } from './record-vocabulary.js';
import { REQUEST_EVENTS, applyEvent, capabilityFailed, transitionCell, type RequestEvent } from './transitions.js';
import { BASE_RECORD, T0, T1, T2, codeOf } from '../tests/support.js';


const base = BASE_RECORD;

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
    ...(status === 'refused' ? { reason: 'execution_busy' } : {}),
  } as StatusAnswer;
}

function run(record: RequestRecord, ...events: RequestEvent[]): RequestRecord {
  return events.reduce<RequestRecord>((r, e) => applyEvent(r, e), record);
}


const intent: RequestEvent = { type: 'intent_recorded', at: T1 };
const poll = (failure: (typeof POLL_FAILURES)[number]): RequestEvent => ({ type: 'poll_failed', at: T2, failure });
const ack: RequestEvent = { type: 'publish_acked', at: T1 };
const seen = (status: StatusAnswer['status'], passed = 0, total = 0): RequestEvent => ({
  type: 'observed',
  at: T2,
  answer: answer(status, passed, total),
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
    const uncertain = run(base, intent, { type: 'publish_uncertain', at: T1, failure: 'timeout' }) as ProtocolRequestRecord;
    expect(uncertain.state).toBe('publishing');
    expect(uncertain.reason).toStrictEqual({ code: 'publish_uncertain', failure: 'timeout' });
  });

  it('returns to prepared with the same JID only when nothing was sent', () => {
    const back = run(base, intent, { type: 'publish_not_sent', at: T1, failure: 'connection_refused' }) as ProtocolRequestRecord;
    expect(back.state).toBe('prepared');
    expect(back.reason).toStrictEqual({ code: 'publish_not_sent', failure: 'connection_refused' });
    expect(back.jid).toBe(base.jid);
    const again = run(back, intent) as ProtocolRequestRecord;
    expect(again.publish_attempts).toBe(2);
  });

  it('refuses a not-sent report once the request is published', () => {
    expect(codeOf(() => run(base, intent, ack, { type: 'publish_not_sent', at: T2, failure: 'connection_refused' }))).toBe('illegal_transition');
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

  it('keeps the readiness reasons of a minion that answered not ready', () => {
    const r = run(base, capabilityFailed(T1, { code: 'not_ready', readiness: ['multiprocessing', 'store_unsafe'] }));
    expect(r).toMatchObject({ state: 'rejected', reason: { code: 'not_ready', readiness: ['multiprocessing', 'store_unsafe'] } });
  });

  it.each(['publishing', 'published'] as const)('rejects a %s request the minion refused, keeps why and releases its target', (state) => {
    const before = state === 'publishing' ? run(base, intent) : run(base, intent, ack);
    const r = applyEvent(before, seen('refused')) as ProtocolRequestRecord;
    expect(r).toMatchObject({
      state: 'rejected',
      reason: { code: 'refused', refusal: 'execution_busy' },
      last_observation: { status: 'refused', reason: 'execution_busy', at: T2 },
    });
    expect(isBlocking(r)).toBe(false);
    expect(applyEvent(r, ack)).toBe(r);
    expect(applyEvent(r, seen('refused'))).toBe(r);
  });

  it('quarantines a refusal that follows running: the minion contradicts itself', () => {
    const r = run(base, intent, ack, seen('running'), seen('refused'));
    expect(r).toMatchObject({ state: 'quarantined', reason: { code: 'refused_after_running', refusal: 'execution_busy' } });
    expect(isBlocking(r)).toBe(true);
  });

  it('still refuses late publication news on a request rejected before publication', () => {
    const r = run(base, { type: 'capability_failed', at: T1, reason: 'capability_unsupported' });
    expect(codeOf(() => applyEvent(r, ack))).toBe('illegal_transition');
    expect(codeOf(() => applyEvent(r, seen('refused')))).toBe('illegal_transition');
  });

  it('records the cause of unknown, and whether the state had been seen running', () => {
    expect(run(base, intent, ack, seen('unknown'))).toMatchObject({ state: 'unknown', reason: { code: 'unknown', cause: 'status_unknown' } });
    expect(run(base, intent, ack, seen('running'), seen('unknown'))).toMatchObject({
      reason: { code: 'unknown', cause: 'status_unknown_after_running' },
    });
  });

  it('records every error answer as the last observation, an unknown code as sent', () => {
    const r = run(base, intent, ack, { type: 'minion_error', at: T2, error: 'newer_module_code' }) as ProtocolRequestRecord;
    expect(r).toMatchObject({ state: 'published', last_observation: { error: 'newer_module_code', at: T2 }, reason: { code: 'minion_error', error: 'newer_module_code' } });
    const m = applyEvent(r, { type: 'minion_error', at: T2, error: 'malformed_store' }) as ProtocolRequestRecord;
    expect(m.last_observation).toStrictEqual({ error: 'malformed_store', at: T2 });
  });

  it('records a failed call as the last observation', () => {
    expect(run(base, intent, ack, poll('no_return'))).toMatchObject({ state: 'published', last_observation: { failure: 'no_return', at: T2 } });
  });

  it('quarantines on an answer bound elsewhere and keeps it until an operator reconciles', () => {
    const q = run(base, intent, ack, poll('answer_binding_conflict'));
    expect(q).toMatchObject({ state: 'quarantined', reason: { code: 'binding_conflict', source: 'answer' } });
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
    const r = run(base, intent, ack, poll('timeout')) as ProtocolRequestRecord;
    expect(r).toMatchObject({ state: 'published', reason: { code: 'poll_failed', failure: 'timeout' } });
  });

  it('quarantines when the minion reports a binding conflict, even a settled unknown', () => {
    const conflict: RequestEvent = { type: 'minion_error', at: T2, error: 'binding_conflict' };
    expect(run(base, intent, ack, conflict)).toMatchObject({ state: 'quarantined', reason: { code: 'binding_conflict', source: 'minion' } });
    const unknown = run(base, intent, ack, seen('unknown'));
    expect(applyEvent(unknown, conflict).state).toBe('quarantined');
    expect(applyEvent(unknown, poll('timeout'))).toBe(unknown);
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
      recorded_state: 'dispatched',
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
  const failure = fc.constantFrom('timeout' as const, 'connection_refused' as const);
  const status = fc.constantFrom<StatusAnswer['status']>('not_started', 'running', 'unknown', 'succeeded', 'failed', 'refused');
  const event: fc.Arbitrary<RequestEvent> = fc.oneof(
    at.map((t) => ({ type: 'intent_recorded', at: t }) as const),
    at.map((t) => ({ type: 'publish_acked', at: t }) as const),
    fc.record({ type: fc.constant('publish_uncertain' as const), at, failure }),
    fc.record({ type: fc.constant('publish_not_sent' as const), at, failure }),
    fc.record({ type: fc.constant('capability_failed' as const), at, reason: fc.constant('capability_missing' as const) }),
    fc.record({ type: fc.constant('poll_failed' as const), at, failure: fc.constantFrom(...POLL_FAILURES) }),
    fc.record({ type: fc.constant('minion_error' as const), at, error: fc.constantFrom('binding_conflict', 'malformed_store', 'inconsistent_evidence') }),
    fc.record({ type: fc.constant('reconciled' as const), at, reason, actor: fc.constant('ops') }),
    fc.tuple(at, status).map(([_at, s]) => seen(s, s === 'succeeded' ? 3 : s === 'failed' ? 1 : 0, s === 'succeeded' || s === 'failed' ? 3 : 0)).map((e) => ({ ...e, at: T2 })),
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

  it('only ever produces records the record schema accepts', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 25 }), (events) => {
        walk(events, (_b, _e, after) => {
          if (after.protocol === 1) expect(RequestRecordSchema.safeParse(after).success).toBe(true);
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
            expect(after.protocol === 1 && after.passed === before.passed && after.total === before.total).toBe(true);
          }
        });
      }),
      params,
    );
  });
});

describe('the transition table', () => {
  it('decides every event in every state', () => {
    for (const state of REQUEST_STATES) {
      for (const type of REQUEST_EVENTS) expect(['illegal', 'keep', 'apply']).toContain(transitionCell(state, type));
    }
  });

  it('lets nothing but a reconciliation touch a legacy record', () => {
    expect(REQUEST_EVENTS.filter((type) => transitionCell('legacy', type) !== 'illegal')).toStrictEqual(['reconciled']);
  });

  it('publishes only from prepared', () => {
    expect(REQUEST_STATES.filter((state) => transitionCell(state, 'intent_recorded') !== 'illegal')).toStrictEqual(['prepared']);
  });
});
