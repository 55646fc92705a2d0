import { z } from 'zod';
import { PROFILE_ROLES, PROFILES, PROTOCOL_VERSION, type Profile } from './constants.js';
import { isJid, isMinionId, isRequestId } from './identity.js';
import { isStateDigestFor } from './patterns.js';
import { InstantSchema, ObservationSchema, RecordReasonSchema, type RecordReason } from './record-vocabulary.js';

/*
 * The master's request record (DESIGN §5): its states, its schema and the
 * predicates stores and the runner share. How a record moves from state to
 * state is transitions.ts. Pure: no I/O and no clock; every time is given.
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
const PROTOCOL_REQUEST_STATES = REQUEST_STATES.filter((state): state is ProtocolRequestState => state !== 'legacy');

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

export interface Reconciliation {
  readonly reason: string;
  readonly actor: string;
  readonly at: string;
}

const ReconciliationSchema = z.strictObject({ reason: z.string().min(1), actor: z.string().min(1), at: InstantSchema });

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** The role a profile runs: its fixed Salt role, or `custom`. */
export function roleForProfile(profile: Profile): string {
  return profile === 'custom' ? 'custom' : PROFILE_ROLES[profile];
}

interface RecordFacts {
  readonly profile: Profile;
  readonly role: string;
  readonly state_digest: string;
  readonly state: ProtocolRequestState;
  readonly passed: number;
  readonly total: number;
  readonly reason: RecordReason | null;
  readonly reconciliation: Reconciliation | null;
}

/** A verdict needs states to count; every other state counts nothing. */
function countsFitState({ state, passed, total }: RecordFacts): boolean {
  if (state === 'succeeded') return total > 0 && passed === total;
  if (state === 'failed') return total > 0 && passed < total;
  return passed === 0 && total === 0;
}

/** The rules across fields, each with the field an operator would look at. */
const RECORD_RULES: ReadonlyArray<readonly [keyof RecordFacts, string, (record: RecordFacts) => boolean]> = [
  ['role', 'the role does not fit the profile', (r) => r.role === roleForProfile(r.profile)],
  ['state_digest', 'the state digest does not fit the profile', (r) => isStateDigestFor(r.profile, r.state_digest)],
  ['passed', 'passed/total do not fit the state', countsFitState],
  ['reconciliation', 'a reconciliation is recorded exactly for a reconciled request', (r) => (r.reconciliation !== null) === (r.state === 'reconciled')],
  ['reason', 'a rejected request records why', (r) => r.state !== 'rejected' || r.reason !== null],
  ['reason', 'an unknown request records its cause', (r) => r.state !== 'unknown' || r.reason?.code === 'unknown'],
];

/**
 * A record written by this protocol: exactly these sixteen keys. It never
 * holds state data, raw state output or credentials. Stores validate every
 * record they write and read with it.
 */
export const RequestRecordSchema = z
  .strictObject({
    protocol: z.literal(PROTOCOL_VERSION),
    request_id: z.string().refine(isRequestId),
    minion_id: z.string().refine(isMinionId),
    profile: z.enum(PROFILES),
    /** The fixed Salt role, or `custom` for caller high data bound by `state_digest`. */
    role: z.string(),
    state_digest: z.string(),
    jid: z.string().refine(isJid),
    state: z.enum(PROTOCOL_REQUEST_STATES),
    /** How many publish intents were recorded; only a provably unsent attempt allows a second. */
    publish_attempts: count,
    /** What the minion said at the latest poll, error answers and failed calls included. */
    last_observation: ObservationSchema.nullable(),
    passed: count,
    total: count,
    /** Why the record is in its state (an uncertain publication, a rejection, a conflict...), never a payload. */
    reason: RecordReasonSchema.nullable(),
    reconciliation: ReconciliationSchema.nullable(),
    created_at: InstantSchema,
    updated_at: InstantSchema,
  })
  .superRefine((record, ctx) => {
    for (const [field, message, holds] of RECORD_RULES) {
      if (!holds(record)) ctx.addIssue({ code: 'custom', path: [field], message });
    }
  });

/** A record written by this protocol (see RequestRecordSchema). */
export type ProtocolRequestRecord = Readonly<z.infer<typeof RequestRecordSchema>>;

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
  /** The state the legacy record says it was in, when it says so as a short plain word; else null. */
  readonly recorded_state: string | null;
  readonly state: 'legacy' | 'reconciled';
  readonly reconciliation: Reconciliation | null;
  readonly legacy_fields: Readonly<Record<string, unknown>>;
}

export type RequestRecord = ProtocolRequestRecord | LegacyRequestRecord;

export interface NewRequest {
  readonly request_id: string;
  readonly minion_id: string;
  readonly profile: Profile;
  readonly state_digest: string;
  readonly jid: string;
  readonly at: string;
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
