import { z } from 'zod';
import { ANSWER_STATUSES, type AnswerStatus } from './answers.js';
import { ProtocolError } from './errors.js';
import { InstantSchema, RECORD_REASON_CODES, type RecordReasonCode } from './record-vocabulary.js';
import { REQUEST_STATES, type RequestRecord } from './request-record.js';
import { REQUEST_EVENTS } from './transitions.js';

/*
 * A request's history: one entry per committed change of its record, written
 * by the store in the same durable step as the record (the file store keeps
 * it in the record's own file, PostgreSQL in the same transaction). It is the
 * evidence chain an operator reads (prepared → intent → publication → polls →
 * terminal): when each change happened, which part of the master saw it, and
 * the closed codes it carried. Never state data, output, comments, tokens or
 * free text: an operator's reconciliation reason stays on the record only.
 *
 * Bounded: the first HISTORY_HEAD entries (creation, intent, publication...)
 * and the last HISTORY_TAIL are kept, and `dropped` counts the ones between
 * them that were let go, so a request whose polls flap cannot grow its record
 * without bound. Entry `i` (0-based) has seq `i + 1`, plus `dropped` once
 * past the head: the numbering says where the gap is.
 */

/** Entries kept from the start of a request's history. */
export const HISTORY_HEAD = 16;
/** Entries kept from its end. */
export const HISTORY_TAIL = 48;
export const HISTORY_MAX_ENTRIES = HISTORY_HEAD + HISTORY_TAIL;

/** What changed the record: its creation, or an event of the state machine (transitions.ts). */
export const HISTORY_EVENTS = ['created', ...REQUEST_EVENTS] as const;
export type HistoryEvent = (typeof HISTORY_EVENTS)[number];

/** Which part of the master committed the change (where its evidence came from). */
export const HISTORY_SOURCES = [
  /** An HTTP admission (POST /v1/requests). */
  'admission',
  /** The CLI's dispatch and publish-pending. */
  'dispatch',
  /** A fleet rollout's batches (CLI or service), through the same dispatch. */
  'rollout',
  /** The service's outbox relay. */
  'relay',
  /** A status poll. */
  'poller',
  /** A return read from salt-api's event stream. */
  'event_stream',
  /** An operator's reconciliation (CLI or API). */
  'reconcile',
] as const;
export type HistorySource = (typeof HISTORY_SOURCES)[number];

/** What a caller tells the store about a change it commits; the rest of the entry comes from the records. */
export interface RecordChange {
  readonly event: Exclude<HistoryEvent, 'created'>;
  readonly source: HistorySource;
}

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const HistoryEntrySchema = z.strictObject({
  /** 1 for the creation, then one more per committed change. */
  seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  /** When the change happened (the record's `updated_at` after it, or its `created_at`). */
  at: InstantSchema,
  /** null for the creation. */
  from_state: z.enum(REQUEST_STATES).nullable(),
  to_state: z.enum(REQUEST_STATES),
  event: z.enum(HISTORY_EVENTS),
  source: z.enum(HISTORY_SOURCES),
  /** The status the minion answered, when a poll or a return produced this change; else null. */
  observed: z.enum(ANSWER_STATUSES).nullable(),
  /** The record's reason code after the change, or null. */
  reason_code: z.enum(RECORD_REASON_CODES as [RecordReasonCode, ...RecordReasonCode[]]).nullable(),
});
export type HistoryEntry = Readonly<z.infer<typeof HistoryEntrySchema>>;

/** Entry `i` has this seq in a history that dropped `dropped` entries after its head. */
function seqAt(index: number, dropped: number): number {
  return index + 1 + (index >= HISTORY_HEAD ? dropped : 0);
}

/**
 * A request's history as stored and served. No entries: the history was not
 * kept (the record predates it). A first entry that is not a creation: it was
 * kept from an upgrade on.
 */
export const RequestHistorySchema = z
  .strictObject({
    entries: z.array(HistoryEntrySchema).max(HISTORY_MAX_ENTRIES),
    /** Entries let go between the head and the tail (see HISTORY_HEAD / HISTORY_TAIL). */
    dropped: count,
  })
  .superRefine((history, ctx) => {
    if (history.dropped > 0 && history.entries.length !== HISTORY_MAX_ENTRIES) {
      ctx.addIssue({ code: 'custom', path: ['dropped'], message: 'only a full history drops entries' });
    }
    history.entries.forEach((entry, index) => {
      if (entry.seq !== seqAt(index, history.dropped)) ctx.addIssue({ code: 'custom', path: ['entries', index, 'seq'], message: 'entries are numbered in order' });
    });
  });
export type RequestHistory = Readonly<{ entries: readonly HistoryEntry[]; dropped: number }>;

/** The history of a record that predates histories. */
export const NO_HISTORY: RequestHistory = { entries: [], dropped: 0 };

function observedBy(after: RequestRecord): AnswerStatus | null {
  if (after.protocol !== 1) return null;
  const observation = after.last_observation;
  return observation !== null && 'status' in observation ? observation.status : null;
}

/** The entry for a record just created (`seq` 1). */
export function creationEntry(record: RequestRecord & { readonly protocol: 1 }, source: HistorySource): HistoryEntry {
  return {
    seq: 1,
    at: record.created_at,
    from_state: null,
    to_state: record.state,
    event: 'created',
    source,
    observed: null,
    reason_code: record.reason?.code ?? null,
  };
}

/** The entry for a committed change from `before` to `after`, numbered `seq`. */
export function changeEntry(before: RequestRecord, after: RequestRecord, change: RecordChange, seq: number): HistoryEntry {
  const at = after.protocol === 1 ? after.updated_at : after.reconciliation?.at;
  if (at === undefined) throw new ProtocolError('illegal_transition', 'a legacy record changes only by a reconciliation');
  const poll = change.event === 'observed' || change.event === 'minion_error' || change.event === 'poll_failed';
  return {
    seq,
    at,
    from_state: before.state,
    to_state: after.state,
    event: change.event,
    source: change.source,
    observed: poll ? observedBy(after) : null,
    reason_code: after.protocol === 1 ? (after.reason?.code ?? null) : null,
  };
}

/** The seq the next entry of this history gets. */
export function nextSeq(history: RequestHistory): number {
  return history.entries.length + history.dropped + 1;
}

/** `history` with `entry` appended (its seq must be nextSeq), the oldest tail entry let go when full. */
export function appendHistory(history: RequestHistory, entry: HistoryEntry): RequestHistory {
  const entries = [...history.entries, entry];
  if (entries.length <= HISTORY_MAX_ENTRIES) return { entries, dropped: history.dropped };
  entries.splice(HISTORY_HEAD, 1);
  return { entries, dropped: history.dropped + 1 };
}

/** `parse` for stored or received histories; undefined when it is not a valid one. */
export function parseRequestHistory(value: unknown): RequestHistory | undefined {
  const parsed = RequestHistorySchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
