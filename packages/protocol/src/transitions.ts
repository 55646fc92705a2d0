import type { StatusAnswer } from './answers.js';
import { ProtocolError } from './errors.js';
import type { ReadinessReason } from './capabilities.js';
import type { Observation, PollFailure, RecordReason, TransportFailure } from './record-vocabulary.js';
import type { LegacyRequestRecord, ProtocolRequestRecord, ProtocolRequestState, RequestRecord, RequestState } from './request-record.js';

/*
 * The master's request state machine (DESIGN §5) as one table: a row per
 * state, a cell per event, so a state or an event without a decision fails to
 * compile. Pure: no I/O and no clock. Every time arrives on the event (`at`,
 * an ISO string) so a store, a model checker and a fixture replay the same
 * sequence to the same record.
 *
 * Contract of `applyEvent(record, event)`:
 *   - a legal transition returns a NEW record;
 *   - an event the rules absorb (a stale or late observation, a late ack,
 *     anything after a terminal result) returns the SAME record object, so a
 *     store can tell "nothing to write" by identity (`keep` cells);
 *   - an event that must never happen in the current state throws
 *     ProtocolError('illegal_transition') (`illegal` cells), e.g. a second
 *     publish intent, or a "not sent" report for a request the minion already
 *     answered about.
 */

export const REQUEST_EVENTS = [
  'intent_recorded',
  'publish_acked',
  'publish_uncertain',
  'publish_not_sent',
  'capability_failed',
  'observed',
  'minion_error',
  'poll_failed',
  'reconciled',
] as const;
export type RequestEventType = (typeof REQUEST_EVENTS)[number];

/** Why dispatch refuses to publish to a minion that answered its capability call. */
export type CapabilityRejection = Extract<RecordReason, { code: 'capability_missing' | 'capability_unsupported' | 'not_ready' }>;

export type RequestEvent =
  /** The publish intent is about to be persisted; from here on the request may be out. */
  | { readonly type: 'intent_recorded'; readonly at: string }
  /** salt-api acknowledged the publication with our JID and exactly our minion. */
  | { readonly type: 'publish_acked'; readonly at: string }
  /** The publish call failed after bytes may have left: stays published-uncertain. */
  | { readonly type: 'publish_uncertain'; readonly at: string; readonly failure: TransportFailure }
  /** The publish call provably sent nothing (connection never established): back to prepared, same JID. */
  | { readonly type: 'publish_not_sent'; readonly at: string; readonly failure: TransportFailure }
  /** The minion answered its capability call without the module 1.1.0 capability: nothing is published. */
  | { readonly type: 'capability_failed'; readonly at: string; readonly reason: 'capability_missing' | 'capability_unsupported' }
  /** The minion answered that it is not ready, for these reasons (at least one): nothing is published. */
  | { readonly type: 'capability_failed'; readonly at: string; readonly reason: 'not_ready'; readonly readiness: readonly ReadinessReason[] }
  /** A status answer already validated against this record's exact binding. */
  | { readonly type: 'observed'; readonly at: string; readonly answer: StatusAnswer }
  /** The minion answered an error (`binding_conflict` quarantines; any other code leaves the request unresolved). */
  | { readonly type: 'minion_error'; readonly at: string; readonly error: string }
  /** The status call gave nothing usable (`answer_binding_conflict` quarantines; anything else leaves it unresolved). */
  | { readonly type: 'poll_failed'; readonly at: string; readonly failure: PollFailure }
  /** An operator resolved the request; nothing is ever published by this. */
  | { readonly type: 'reconciled'; readonly at: string; readonly reason: string; readonly actor: string };

export type RequestEventOf<T extends RequestEventType> = Extract<RequestEvent, { readonly type: T }>;

type Handler<R, T extends RequestEventType> = (record: R, event: RequestEventOf<T>) => RequestRecord;
/** `illegal`: refuse (throws); `keep`: absorb (same record); a function: the transition. */
type Cell<R, T extends RequestEventType> = 'illegal' | 'keep' | Handler<R, T>;
type Row<R> = { readonly [T in RequestEventType]: Cell<R, T> };
type TransitionTable = { readonly [S in ProtocolRequestState]: Row<ProtocolRequestRecord> } & { readonly legacy: Row<LegacyRequestRecord> };

function illegal(record: RequestRecord, event: RequestEvent): never {
  throw new ProtocolError('illegal_transition', `event ${event.type} is not allowed in state ${record.state}`);
}

function next(record: ProtocolRequestRecord, at: string, changes: Partial<ProtocolRequestRecord>): ProtocolRequestRecord {
  return { ...record, ...changes, updated_at: at };
}

const startPublishing: Handler<ProtocolRequestRecord, 'intent_recorded'> = (r, e) =>
  next(r, e.at, { state: 'publishing', publish_attempts: r.publish_attempts + 1, reason: null });

const acknowledge: Handler<ProtocolRequestRecord, 'publish_acked'> = (r, e) => next(r, e.at, { state: 'published', reason: null });

const stayUncertain: Handler<ProtocolRequestRecord, 'publish_uncertain'> = (r, e) =>
  next(r, e.at, { reason: { code: 'publish_uncertain', failure: e.failure } });

// The single way back to `prepared`. A `not_started` seen meanwhile leaves the
// state at `publishing`, so it does not stand in the way of the proof that
// nothing left.
const backToPrepared: Handler<ProtocolRequestRecord, 'publish_not_sent'> = (r, e) =>
  next(r, e.at, { state: 'prepared', reason: { code: 'publish_not_sent', failure: e.failure } });

const reject: Handler<ProtocolRequestRecord, 'capability_failed'> = (r, e) =>
  next(r, e.at, { state: 'rejected', reason: e.reason === 'not_ready' ? { code: e.reason, readiness: e.readiness } : { code: e.reason } });

/** The event that records a capability rejection. */
export function capabilityFailed(at: string, rejection: CapabilityRejection): RequestEventOf<'capability_failed'> {
  return rejection.code === 'not_ready'
    ? { type: 'capability_failed', at, reason: rejection.code, readiness: rejection.readiness }
    : { type: 'capability_failed', at, reason: rejection.code };
}

const reconcile: Handler<ProtocolRequestRecord, 'reconciled'> = (r, e) =>
  next(r, e.at, { state: 'reconciled', reconciliation: { reason: e.reason, actor: e.actor, at: e.at } });

/** What a poll event says the minion answered: the record's `last_observation` once it is committed. */
export function observationOf(event: RequestEventOf<'observed' | 'minion_error' | 'poll_failed'>): Observation {
  switch (event.type) {
    case 'observed':
      return event.answer.status === 'refused'
        ? { status: 'refused', reason: event.answer.reason, at: event.at }
        : { status: event.answer.status, at: event.at };
    case 'minion_error':
      return { error: event.error, at: event.at };
    case 'poll_failed':
      return { failure: event.failure, at: event.at };
  }
}

function observe(record: ProtocolRequestRecord, event: RequestEventOf<'observed'>): ProtocolRequestRecord {
  const { answer, at } = event;
  const last_observation = observationOf(event);
  switch (answer.status) {
    case 'not_started':
      // No evidence on the minion never makes a published claim re-publishable
      // and never undoes `running`: keep the state, remember what was seen.
      return next(record, at, { last_observation });
    case 'running':
      return next(record, at, { state: 'running', last_observation, reason: null });
    case 'succeeded':
    case 'failed':
      return next(record, at, { state: answer.status, last_observation, passed: answer.passed, total: answer.total, reason: null });
    case 'unknown': {
      const cause = record.state === 'running' ? 'status_unknown_after_running' : 'status_unknown';
      return next(record, at, { state: 'unknown', last_observation, reason: { code: 'unknown', cause } });
    }
    case 'refused': {
      // A minion writes a refusal only where no claim exists. Having said
      // `running` before, it contradicts itself: that never proves "not
      // applied", so the target stays blocked for an operator.
      if (record.state === 'running') {
        return next(record, at, { state: 'quarantined', last_observation, reason: { code: 'refused_after_running', refusal: answer.reason } });
      }
      return next(record, at, { state: 'rejected', last_observation, reason: { code: 'refused', refusal: answer.reason } });
    }
  }
}

const recordMinionError: Handler<ProtocolRequestRecord, 'minion_error'> = (r, e) => {
  const last_observation = observationOf(e);
  if (e.error === 'binding_conflict') {
    return next(r, e.at, { state: 'quarantined', last_observation, reason: { code: 'binding_conflict', source: 'minion' } });
  }
  return next(r, e.at, { last_observation, reason: { code: 'minion_error', error: e.error } });
};

const recordPollFailure: Handler<ProtocolRequestRecord, 'poll_failed'> = (r, e) => {
  const last_observation = observationOf(e);
  if (e.failure === 'answer_binding_conflict') {
    return next(r, e.at, { state: 'quarantined', last_observation, reason: { code: 'binding_conflict', source: 'answer' } });
  }
  return next(r, e.at, { last_observation, reason: { code: 'poll_failed', failure: e.failure } });
};

/** An `unknown` request is settled, but evidence bound elsewhere still quarantines it. */
const quarantineOnMinionConflict: Handler<ProtocolRequestRecord, 'minion_error'> = (r, e) => (e.error === 'binding_conflict' ? recordMinionError(r, e) : r);
const quarantineOnAnswerConflict: Handler<ProtocolRequestRecord, 'poll_failed'> = (r, e) =>
  e.failure === 'answer_binding_conflict' ? recordPollFailure(r, e) : r;

/** A request rejected by the minion's refusal was published: late news about that publication is absorbed. */
function afterRefusal<T extends RequestEventType>(r: ProtocolRequestRecord, e: RequestEventOf<T>): RequestRecord {
  return r.reason?.code === 'refused' ? r : illegal(r, e);
}

const reconcileLegacy: Handler<LegacyRequestRecord, 'reconciled'> = (r, e) => ({
  ...r,
  state: 'reconciled',
  reconciliation: { reason: e.reason, actor: e.actor, at: e.at },
});

/** Waiting for the minion's answer: the publication may be out. */
const awaitingAnswer = {
  intent_recorded: 'illegal',
  publish_acked: 'keep',
  publish_uncertain: 'keep',
  publish_not_sent: 'illegal',
  capability_failed: 'illegal',
  observed: observe,
  minion_error: recordMinionError,
  poll_failed: recordPollFailure,
  reconciled: reconcile,
} as const satisfies Row<ProtocolRequestRecord>;

/** Settled by a result: nothing changes it; only evidence from before the result arrives late. */
const settled = {
  intent_recorded: 'illegal',
  publish_acked: 'keep',
  publish_uncertain: 'keep',
  publish_not_sent: 'illegal',
  capability_failed: 'illegal',
  observed: 'keep',
  minion_error: 'keep',
  poll_failed: 'keep',
  reconciled: 'illegal',
} as const satisfies Row<ProtocolRequestRecord>;

const TRANSITIONS = {
  prepared: {
    intent_recorded: startPublishing,
    publish_acked: 'illegal',
    publish_uncertain: 'illegal',
    publish_not_sent: 'illegal',
    capability_failed: reject,
    // Never published: there is nothing the minion could say about it.
    observed: 'illegal',
    minion_error: 'illegal',
    poll_failed: 'illegal',
    // An operator may cancel a request that was never published.
    reconciled: reconcile,
  },
  publishing: {
    ...awaitingAnswer,
    // A poller may have seen the minion's answer before the ack was recorded.
    publish_acked: acknowledge,
    publish_uncertain: stayUncertain,
    publish_not_sent: backToPrepared,
  },
  published: awaitingAnswer,
  running: awaitingAnswer,
  succeeded: settled,
  failed: settled,
  unknown: {
    ...settled,
    minion_error: quarantineOnMinionConflict,
    poll_failed: quarantineOnAnswerConflict,
    reconciled: reconcile,
  },
  rejected: {
    ...settled,
    publish_acked: afterRefusal,
    publish_uncertain: afterRefusal,
    observed: afterRefusal,
  },
  quarantined: { ...settled, reconciled: reconcile },
  reconciled: settled,
  // A legacy record keeps its original meaning: the only thing this protocol
  // may do to it is record an operator's reconciliation.
  legacy: {
    intent_recorded: 'illegal',
    publish_acked: 'illegal',
    publish_uncertain: 'illegal',
    publish_not_sent: 'illegal',
    capability_failed: 'illegal',
    observed: 'illegal',
    minion_error: 'illegal',
    poll_failed: 'illegal',
    reconciled: reconcileLegacy,
  },
} as const satisfies TransitionTable;

/** What the table decides for an event in a state, without a record (for fixture coverage and docs). */
export function transitionCell(state: RequestState, type: RequestEventType): 'illegal' | 'keep' | 'apply' {
  const cell = TRANSITIONS[state][type];
  return typeof cell === 'function' ? 'apply' : cell;
}

/**
 * The poller validates every answer against the exact binding before it builds
 * an event; this is the second line of defence, so a wiring mistake cannot
 * commit another request's result.
 */
function assertSameBinding(record: ProtocolRequestRecord, answer: StatusAnswer): void {
  if (
    answer.request_id !== record.request_id ||
    answer.minion_id !== record.minion_id ||
    answer.jid !== record.jid ||
    answer.profile !== record.profile ||
    answer.state_digest !== record.state_digest
  ) {
    throw new ProtocolError('binding_conflict', 'the status answer is bound to another request, minion, JID, profile or digest');
  }
}

function run<R extends RequestRecord, T extends RequestEventType>(cell: Cell<R, T>, record: R, event: RequestEventOf<T>): RequestRecord {
  if (cell === 'illegal') return illegal(record, event);
  if (cell === 'keep') return record;
  return cell(record, event);
}

/** Applies one event; see the contract at the top of this file. */
export function applyEvent(record: RequestRecord, event: RequestEvent): RequestRecord {
  if (record.protocol === null) {
    // A reconciled legacy record is settled for good: nothing applies to it.
    if (record.state !== 'legacy') return illegal(record, event);
    return run(TRANSITIONS.legacy[event.type] as Cell<LegacyRequestRecord, typeof event.type>, record, event);
  }
  if (event.type === 'observed') assertSameBinding(record, event.answer);
  return run(TRANSITIONS[record.state][event.type] as Cell<ProtocolRequestRecord, typeof event.type>, record, event);
}
