import {
  CALL_FAILURES,
  POLL_FAILURES,
  RequestRecordSchema,
  TRANSPORT_FAILURES,
  isErrorCodeShape,
  isJid,
  isMinionId,
  HistoryEntrySchema,
  NO_HISTORY,
  appendHistory,
  changeEntry,
  creationEntry,
  nextSeq,
  parseRequestHistory,
  type HistoryEntry,
  type HistorySource,
  type RecordChange,
  type LegacyRequestRecord,
  type RequestHistory,
  type ProtocolRequestRecord,
  type RecordReason,
  type Reconciliation,
  type RequestRecord,
} from '@oduflow/protocol';
import { MasterRunnerError } from './errors.js';
import { isPlainObject } from './plain-object.js';

/*
 * How records look at rest. A protocol-1 record is stored as itself and
 * validated with the protocol's RequestRecordSchema on every read and write,
 * so a hand-edited or truncated record stops the runner (store_corrupt)
 * instead of being misread, and nothing unreadable is ever written.
 *
 * Two kinds of older record are read here, and only here:
 *   - records that predate protocol 1 (no `protocol` key at all) are loaded
 *     as `legacy`, their fields kept verbatim; an operator reconciliation is
 *     stored beside them under one added key, so the original interpretation
 *     is never rewritten. A `protocol` key with any value but 1 is not
 *     legacy: it is a record this runner cannot read (store_corrupt);
 *   - protocol-1 records written by master-runner 0.1.0 carry `reason` as a
 *     string (`status_timeout`, `publish_not_sent_connection_refused`...) and
 *     no cause on `unknown`. Every such string came from a closed set and is
 *     read as the structured reason it meant; the record is written in the
 *     current shape the next time it changes.
 *
 * The file store keeps a request's history (@oduflow/protocol
 * request-history.ts) in the record's own file, under one added key beside
 * the record's fields, so a change and its history entry are one atomic
 * write. Reading a record ignores the history (a JSON parse, no validation:
 * lists stay as cheap as before); the history is validated when it is read
 * for itself or extended. A file without the key (written before histories)
 * has no history: "not kept", never an error.
 */

/** The key a stored record's history is kept under (protocol 1 and legacy alike: a legacy record may have its own `history`). */
const HISTORY_KEY = 'oduflow_history';

/** The one key this runner adds to a legacy record: the operator's reconciliation. */
export const LEGACY_RECONCILIATION_KEY = 'oduflow_reconciliation';

/** Legacy records may name their target under one of these keys. */
const LEGACY_TARGET_KEYS = ['minion_id', 'target', 'minion', 'tgt'] as const;
/** ...and their own state under one of these, as a short plain word (never anything that could be raw output). */
const LEGACY_STATE_KEYS = ['state', 'status'] as const;
const LEGACY_STATE_WORD = /^[A-Za-z][A-Za-z0-9_.-]{0,31}$/;


function isReconciliation(value: unknown): value is Reconciliation {
  return (
    isPlainObject(value) &&
    Object.keys(value).length === 3 &&
    typeof value['reason'] === 'string' &&
    typeof value['actor'] === 'string' &&
    typeof value['at'] === 'string'
  );
}

function corrupt(name: string, what: string): MasterRunnerError {
  return new MasterRunnerError('store_corrupt', `stored record ${name} ${what}`);
}

function oneOf<T extends string>(set: readonly T[], value: string): value is T {
  return (set as readonly string[]).includes(value);
}

/** Reasons master-runner 0.1.0 wrote as whole words. */
const LEGACY_REASON_WORDS: Readonly<Record<string, RecordReason>> = {
  capability_missing: { code: 'capability_missing' },
  capability_unsupported: { code: 'capability_unsupported' },
  capability_no_return: { code: 'capability_unanswered', failure: 'no_return' },
  capability_no_target: { code: 'capability_unanswered', failure: 'no_target' },
  minion_binding_conflict: { code: 'binding_conflict', source: 'minion' },
  answer_binding_conflict: { code: 'binding_conflict', source: 'answer' },
};

/** Reasons master-runner 0.1.0 built as `<prefix><closed word>`; longer prefixes first. */
const LEGACY_REASON_PREFIXES: ReadonlyArray<readonly [string, (word: string) => RecordReason | undefined]> = [
  ['publish_not_sent_', (w) => (oneOf(TRANSPORT_FAILURES, w) ? { code: 'publish_not_sent', failure: w } : undefined)],
  ['publish_', (w) => (oneOf(TRANSPORT_FAILURES, w) ? { code: 'publish_uncertain', failure: w } : undefined)],
  ['capability_call_', (w) => (oneOf(CALL_FAILURES, w) ? { code: 'capability_unanswered', failure: w } : undefined)],
  ['minion_error_', (w) => (isErrorCodeShape(w) ? { code: 'minion_error', error: w } : undefined)],
  ['status_', (w) => (oneOf(POLL_FAILURES, w) ? { code: 'poll_failed', failure: w } : undefined)],
];

/** The structured reason a 0.1.0 reason string meant, or the value unchanged (for the schema to judge). */
function upgradeReason(reason: unknown, state: unknown): unknown {
  // 0.1.0 recorded no cause for unknown; the only way there was a status answer `unknown`.
  if (reason === null && state === 'unknown') return { code: 'unknown', cause: 'status_unknown' };
  if (typeof reason !== 'string') return reason;
  const word = LEGACY_REASON_WORDS[reason];
  if (word !== undefined) return word;
  for (const [prefix, read] of LEGACY_REASON_PREFIXES) {
    if (reason.startsWith(prefix)) return read(reason.slice(prefix.length)) ?? reason;
  }
  return reason;
}

function decodeProtocolRecord(raw: Record<string, unknown>, requestId: string): ProtocolRequestRecord {
  const parsed = RequestRecordSchema.safeParse({ ...raw, reason: upgradeReason(raw['reason'], raw['state']) });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    // The path names a field of ours; the value and zod's message (which may quote it) are never shown.
    if (issue?.code === 'unrecognized_keys') throw corrupt(requestId, 'has fields outside a protocol 1 record');
    const field = issue === undefined || issue.path.length === 0 ? 'itself' : `field "${issue.path.map(String).join('.')}"`;
    throw corrupt(requestId, `is not a valid protocol 1 record (${field})`);
  }
  if (parsed.data.request_id !== requestId) throw corrupt(requestId, 'is stored under another request id');
  return parsed.data;
}

function legacyFrom(raw: Record<string, unknown>, requestId: string): LegacyRequestRecord {
  const { [LEGACY_RECONCILIATION_KEY]: reconciliation, [HISTORY_KEY]: _history, ...original } = raw;
  const target = LEGACY_TARGET_KEYS.map((k) => original[k]).find(isMinionId);
  const recorded = LEGACY_STATE_KEYS.map((k) => original[k]).find((v): v is string => typeof v === 'string' && LEGACY_STATE_WORD.test(v));
  const jid = original['jid'];
  const reconciled = isReconciliation(reconciliation) ? reconciliation : null;
  return {
    protocol: null,
    request_id: requestId,
    minion_id: target ?? null,
    jid: isJid(jid) ? jid : null,
    recorded_state: recorded ?? null,
    state: reconciled === null ? 'legacy' : 'reconciled',
    reconciliation: reconciled,
    legacy_fields: original,
  };
}

/** Interprets what is stored under `requestId`; throws store_corrupt for anything it cannot read safely. */
export function decodeRecord(raw: unknown, requestId: string): RequestRecord {
  if (!isPlainObject(raw)) throw corrupt(requestId, 'is not a JSON object');
  if (!Object.hasOwn(raw, 'protocol')) return legacyFrom(raw, requestId);
  if (raw['protocol'] !== 1) throw corrupt(requestId, 'names a protocol this runner does not speak');
  if (!Object.hasOwn(raw, HISTORY_KEY)) return decodeProtocolRecord(raw, requestId);
  const { [HISTORY_KEY]: _history, ...fields } = raw;
  return decodeProtocolRecord(fields, requestId);
}

/** The history stored beside a record (`raw` as decodeRecord reads it); none for a file written before histories. */
export function decodeHistory(raw: unknown, requestId: string): RequestHistory {
  if (!isPlainObject(raw) || !Object.hasOwn(raw, HISTORY_KEY)) return NO_HISTORY;
  const history = parseRequestHistory(raw[HISTORY_KEY]);
  if (history === undefined) throw corrupt(requestId, 'has a history that is not valid');
  return history;
}

/** The stored form of a record with its history (the file store's). */
export function encodeRecordWithHistory(record: RequestRecord, history: RequestHistory): Record<string, unknown> {
  return { ...encodeRecord(record), [HISTORY_KEY]: { entries: history.entries, dropped: history.dropped } };
}

/** The stored form of a record; a protocol-1 record that would not read back is refused before it is written. */
export function encodeRecord(record: RequestRecord): Record<string, unknown> {
  if (record.protocol === 1) {
    const parsed = RequestRecordSchema.safeParse(record);
    if (!parsed.success) {
      const field = parsed.error.issues[0]?.path.map(String).join('.') ?? '';
      throw new MasterRunnerError('internal', `refusing to store request ${record.request_id}: field "${field}" is not valid`, {
        requestId: record.request_id,
      });
    }
    // The schema's output: only the known fields, in a fixed order; a stray property never reaches disk.
    return parsed.data;
  }
  return record.reconciliation === null
    ? { ...record.legacy_fields }
    : { ...record.legacy_fields, [LEGACY_RECONCILIATION_KEY]: record.reconciliation };
}

function checkedEntry(entry: HistoryEntry, requestId: string): HistoryEntry {
  const parsed = HistoryEntrySchema.safeParse(entry);
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path.map(String).join('.') ?? '';
    throw new MasterRunnerError('internal', `refusing to store a history entry of request ${requestId}: field "${field}" is not valid`, { requestId });
  }
  return parsed.data;
}

/** The first entry of a new record's history (validated: a caller's source outside the closed set never reaches a store). */
export function creationHistoryEntry(record: ProtocolRequestRecord, source: HistorySource): HistoryEntry {
  return checkedEntry(creationEntry(record, source), record.request_id);
}

/** The entry numbered `seq` for a committed change from `before` to `after` (validated). */
export function changeHistoryEntry(seq: number, before: RequestRecord, after: RequestRecord, change: RecordChange): HistoryEntry {
  // A JavaScript caller may pass anything: it is refused before anything is written.
  const given = change as unknown;
  if (typeof given !== 'object' || given === null || change.event === ('created' as string)) {
    throw new MasterRunnerError('internal', 'a record change needs the event and the source that made it', { requestId: after.request_id });
  }
  return checkedEntry(changeEntry(before, after, { event: change.event, source: change.source }, seq), after.request_id);
}

/** `history` with the entry for a committed change appended (see changeHistoryEntry). */
export function withChange(history: RequestHistory, before: RequestRecord, after: RequestRecord, change: RecordChange): RequestHistory {
  return appendHistory(history, changeHistoryEntry(nextSeq(history), before, after, change));
}
