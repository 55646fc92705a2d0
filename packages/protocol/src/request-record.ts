import type { StatusAnswer } from './answers.js';
import { PROFILE_ROLES, PROTOCOL_VERSION, type Profile } from './constants.js';
import { ProtocolError } from './errors.js';

/*
 * The master's request state machine (DESIGN §5), pure: no I/O and no clock.
 * Every time arrives on the event (`at`, an ISO string) so a store, a model
 * checker and a fixture can replay the same sequence and get the same record.
 *
 * Contract of `applyEvent(record, event)`:
 *   - a legal transition returns a NEW record;
 *   - an event that the rules absorb (a stale or conflicting observation, a
 *     late ack, anything arriving after a terminal result) returns the SAME
 *     record object, so a store can tell "nothing to write" by identity;
 *   - an event that must never happen in the current state throws
 *     ProtocolError('illegal_transition'), e.g. a second publish intent, or a
 *     "not sent" report for a request the minion already answered about.
 */

export const REQUEST_STATES = [
  'prepared',
  'publishing',
  'published',
  'running',
  'succeeded',
  'failed',
  'unknown',
  'rejected',
  'quarantined',
  'reconciled',
  'legacy',
] as const;
export type RequestState = (typeof REQUEST_STATES)[number];

/** States a protocol-1 record can take; `legacy` belongs to records that predate protocol 1. */
export type ProtocolRequestState = Exclude<RequestState, 'legacy'>;

/** Absorbing: no event changes a record in one of these states. */
export const TERMINAL_STATES = ['succeeded', 'failed', 'rejected', 'reconciled'] as const satisfies readonly RequestState[];
const TERMINAL: ReadonlySet<RequestState> = new Set(TERMINAL_STATES);

/**
 * States that refuse another managed dispatch to the same target. `prepared`
 * blocks too: it will be published later with its reserved JID, and two
 * publishable requests for one target would break "one unresolved published
 * request per target" the moment both went out.
 */
export const BLOCKING_STATES = [
  'prepared',
  'publishing',
  'published',
  'running',
  'unknown',
  'quarantined',
  'legacy',
] as const satisfies readonly RequestState[];
const BLOCKING: ReadonlySet<RequestState> = new Set(BLOCKING_STATES);

/** States in which the minion is asked for status: a publication may exist and no answer has settled it. */
export const POLLABLE_STATES = ['publishing', 'published', 'running'] as const satisfies readonly RequestState[];
const POLLABLE: ReadonlySet<RequestState> = new Set(POLLABLE_STATES);

/** Everything a status answer may report; the last one seen is kept for operators. */
export type ObservedStatus = StatusAnswer['status'];

export interface Reconciliation {
  readonly reason: string;
  readonly actor: string;
  readonly at: string;
}

export interface Observation {
  readonly status: ObservedStatus;
  readonly at: string;
}

/** A record written by this protocol. Never holds state data, raw state output or credentials. */
export interface ProtocolRequestRecord {
  readonly protocol: typeof PROTOCOL_VERSION;
  readonly request_id: string;
  readonly minion_id: string;
  readonly profile: Profile;
  /** The fixed Salt role, or `custom` for caller high data bound by `state_digest`. */
  readonly role: string;
  readonly state_digest: string;
  readonly jid: string;
  readonly state: ProtocolRequestState;
  /** How many publish intents were recorded; only a provably unsent attempt allows a second. */
  readonly publish_attempts: number;
  readonly last_observation: Observation | null;
  readonly passed: number;
  readonly total: number;
  /** The latest machine-readable reason (uncertain publish, poll failure, conflict, rejection), never a payload. */
  readonly reason: string | null;
  readonly reconciliation: Reconciliation | null;
  readonly created_at: string;
  readonly updated_at: string;
}

/**
 * A record that predates protocol 1. Its original fields are kept verbatim in
 * `legacy_fields` and keep their original interpretation: nothing here is
 * adopted as a receipt; only an operator reconciliation resolves it.
 */
export interface LegacyRequestRecord {
  readonly protocol: null;
  readonly request_id: string;
  /** The target, when the legacy record names a valid minion id; null blocks every target (fail closed). */
  readonly minion_id: string | null;
  readonly jid: string | null;
  readonly state: 'legacy' | 'reconciled';
  readonly reconciliation: Reconciliation | null;
  readonly legacy_fields: Readonly<Record<string, unknown>>;
}

export type RequestRecord = ProtocolRequestRecord | LegacyRequestRecord;

export const REQUEST_EVENTS = [
  'intent_recorded',
  'publish_acked',
  'publish_uncertain',
  'publish_not_sent',
  'capability_failed',
  'observed',
  'poll_failed',
  'conflict',
  'reconciled',
] as const;
export type RequestEventType = (typeof REQUEST_EVENTS)[number];

export type RequestEvent =
  /** The publish intent is about to be persisted; from here on the request may be out. */
  | { readonly type: 'intent_recorded'; readonly at: string }
  /** salt-api acknowledged the publication with our JID and exactly our minion. */
  | { readonly type: 'publish_acked'; readonly at: string }
  /** The publish call failed after bytes may have left: stays published-uncertain. */
  | { readonly type: 'publish_uncertain'; readonly at: string; readonly reason: string }
  /** The publish call provably sent nothing (connection never established): back to prepared, same JID. */
  | { readonly type: 'publish_not_sent'; readonly at: string; readonly reason: string }
  /** The minion did not prove protocol 1 capability: nothing is published. */
  | { readonly type: 'capability_failed'; readonly at: string; readonly reason: string }
  /** A status answer already validated against this record's exact binding. */
  | { readonly type: 'observed'; readonly at: string; readonly answer: StatusAnswer }
  /** The status call failed or its answer was malformed: unresolved, reason recorded. */
  | { readonly type: 'poll_failed'; readonly at: string; readonly reason: string }
  /** The minion holds evidence bound differently (request, JID, profile or digest). */
  | { readonly type: 'conflict'; readonly at: string; readonly reason: string }
  /** An operator resolved the request; nothing is ever published by this. */
  | { readonly type: 'reconciled'; readonly at: string; readonly reason: string; readonly actor: string };

export interface NewRequest {
  readonly request_id: string;
  readonly minion_id: string;
  readonly profile: Profile;
  readonly state_digest: string;
  readonly jid: string;
  readonly at: string;
}

/** The role a profile runs: its fixed Salt role, or `custom`. */
export function roleForProfile(profile: Profile): string {
  return profile === 'custom' ? 'custom' : PROFILE_ROLES[profile];
}

/**
 * A fresh `prepared` record. The caller has validated the identities (the
 * protocol parsers) and reserved the JID; this only assembles the record.
 */
export function createRequestRecord(input: NewRequest): ProtocolRequestRecord {
  return {
    protocol: PROTOCOL_VERSION,
    request_id: input.request_id,
    minion_id: input.minion_id,
    profile: input.profile,
    role: roleForProfile(input.profile),
    state_digest: input.state_digest,
    jid: input.jid,
    state: 'prepared',
    publish_attempts: 0,
    last_observation: null,
    passed: 0,
    total: 0,
    reason: null,
    reconciliation: null,
    created_at: input.at,
    updated_at: input.at,
  };
}

export function isProtocolRecord(record: RequestRecord): record is ProtocolRequestRecord {
  return record.protocol === PROTOCOL_VERSION;
}

/** No event changes this record any more. */
export function isTerminal(record: RequestRecord): boolean {
  return TERMINAL.has(record.state);
}

/** This record refuses another managed dispatch to its target. */
export function isBlocking(record: RequestRecord): boolean {
  return BLOCKING.has(record.state);
}

/** The master should ask the minion for status. */
export function isPollable(record: RequestRecord): boolean {
  return POLLABLE.has(record.state);
}

function illegal(record: RequestRecord, event: RequestEvent): never {
  throw new ProtocolError('illegal_transition', `event ${event.type} is not allowed in state ${record.state}`);
}

function next(record: ProtocolRequestRecord, at: string, changes: Partial<ProtocolRequestRecord>): ProtocolRequestRecord {
  return { ...record, ...changes, updated_at: at };
}

/** Applies one event; see the contract at the top of this file. */
export function applyEvent(record: RequestRecord, event: RequestEvent): RequestRecord {
  if (!isProtocolRecord(record)) return applyToLegacy(record, event);
  switch (event.type) {
    case 'intent_recorded':
      // Only an unpublished request may be published; `publishing` never is again.
      if (record.state !== 'prepared') return illegal(record, event);
      return next(record, event.at, { state: 'publishing', publish_attempts: record.publish_attempts + 1, reason: null });
    case 'publish_acked':
      if (record.state === 'publishing') return next(record, event.at, { state: 'published', reason: null });
      // A poller may have seen the minion's answer before the ack was recorded.
      if (isAfterPublication(record)) return record;
      return illegal(record, event);
    case 'publish_uncertain':
      if (record.state === 'publishing') return next(record, event.at, { reason: event.reason });
      if (isAfterPublication(record)) return record;
      return illegal(record, event);
    case 'publish_not_sent':
      // The single way back to `prepared`. Once anything else is recorded the
      // request may be out, and a "not sent" claim contradicts the record.
      // A `not_started` seen meanwhile leaves the state at `publishing`, so it
      // does not stand in the way of the proof that nothing left.
      if (record.state !== 'publishing') return illegal(record, event);
      return next(record, event.at, { state: 'prepared', reason: event.reason });
    case 'capability_failed':
      if (record.state !== 'prepared') return illegal(record, event);
      return next(record, event.at, { state: 'rejected', reason: event.reason });
    case 'observed':
      return observe(record, event);
    case 'poll_failed':
      if (isPollable(record)) return next(record, event.at, { reason: event.reason });
      // A settled record keeps the reason that settled it.
      if (isTerminal(record) || record.state === 'unknown' || record.state === 'quarantined') return record;
      return illegal(record, event);
    case 'conflict':
      if (isPollable(record) || record.state === 'unknown') {
        return next(record, event.at, { state: 'quarantined', reason: event.reason });
      }
      if (record.state === 'quarantined' || isTerminal(record)) return record;
      return illegal(record, event);
    case 'reconciled':
      if (isTerminal(record)) return illegal(record, event);
      return next(record, event.at, {
        state: 'reconciled',
        reconciliation: { reason: event.reason, actor: event.actor, at: event.at },
      });
  }
}

/** Anything that can only be recorded once the request may have reached the minion. */
function isAfterPublication(record: ProtocolRequestRecord): boolean {
  return record.state !== 'prepared' && record.state !== 'publishing' && record.state !== 'rejected';
}

function observe(record: ProtocolRequestRecord, event: Extract<RequestEvent, { type: 'observed' }>): RequestRecord {
  const { answer } = event;
  assertSameBinding(record, answer);
  // Never published: there is nothing the minion could say about it.
  if (record.state === 'prepared' || record.state === 'rejected') return illegal(record, event);
  // Settled states keep what they recorded; a later answer never rewrites them.
  if (isTerminal(record) || record.state === 'unknown' || record.state === 'quarantined') return record;

  const observation: Observation = { status: answer.status, at: event.at };
  switch (answer.status) {
    case 'not_started':
      // No evidence on the minion never makes a published claim re-publishable
      // and never undoes `running`: keep the state, remember what was seen.
      return next(record, event.at, { last_observation: observation });
    case 'running':
      return next(record, event.at, {
        state: 'running',
        last_observation: observation,
        reason: null,
      });
    case 'succeeded':
    case 'failed':
    case 'unknown':
      return next(record, event.at, {
        state: answer.status,
        last_observation: observation,
        passed: answer.passed,
        total: answer.total,
        reason: null,
      });
  }
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

function applyToLegacy(record: LegacyRequestRecord, event: RequestEvent): RequestRecord {
  // A legacy record keeps its original meaning: the only thing this protocol
  // may do to it is record an operator's reconciliation.
  if (event.type === 'reconciled' && record.state === 'legacy') {
    return { ...record, state: 'reconciled', reconciliation: { reason: event.reason, actor: event.actor, at: event.at } };
  }
  return illegal(record, event);
}
