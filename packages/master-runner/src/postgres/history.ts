import { HISTORY_HEAD, HISTORY_TAIL, NO_HISTORY, parseRequestHistory, type HistoryEntry, type RequestHistory } from '@oduflow/protocol';
import { MasterRunnerError } from '../errors.js';
import type { Query } from './database.js';
import { SCHEMA } from './schema.js';

/*
 * A request's history as rows of request_history, one per entry, written
 * inside the transaction that writes the record change (createIn and
 * updateRequest, each in the same statement as the record's own INSERT or
 * UPDATE), so a rolled-back change takes its entry with it. The cap
 * is kept the same way: the insert of entry n deletes the entry that fell
 * out of the tail (seq n - HISTORY_TAIL, when past the head), so the rows
 * are always the first HISTORY_HEAD and the last HISTORY_TAIL entries and
 * `dropped` is the last seq minus the row count.
 */

export const HISTORY = `${SCHEMA}.request_history`;
export const HISTORY_COLUMNS = 'seq, at, from_state, to_state, event, source, observed, reason_code';

interface HistoryRow {
  /** null on the LEFT JOIN's row of a request without history rows. */
  readonly seq: number | null;
  readonly at: string;
  readonly from_state: string | null;
  readonly to_state: string;
  readonly event: string;
  readonly source: string;
  readonly observed: string | null;
  readonly reason_code: string | null;
}

/** An entry's columns after `seq`, in HISTORY_COLUMNS order. */
export function historyValues(entry: HistoryEntry): unknown[] {
  return [entry.at, entry.from_state, entry.to_state, entry.event, entry.source, entry.observed, entry.reason_code];
}

/** The parameters of appendChangeSql: $1 the request id, $2–$8 the entry, $9–$10 the cap; the change's own start at $11. */
export function appendValues(requestId: string, entry: HistoryEntry): unknown[] {
  return [requestId, ...historyValues(entry), HISTORY_HEAD, HISTORY_TAIL];
}

/**
 * One statement that makes `change` (an UPDATE … RETURNING of the request
 * $1, its own parameters from $11 on), appends the entry for it, numbered
 * after the request's last one (1 for a request stored before histories;
 * `entry.seq` is not used), lets go of the entry that fell out of the tail,
 * and answers `n`: how many rows the change updated (0: nothing was written,
 * history included). Every data-modifying part of a WITH runs, referenced
 * or not, on one snapshot: the INSERT and the DELETE see the history rows
 * as they were before the statement, which is all they need (the new seq is
 * one past the last; only an older entry is removed). A history row is only
 * ever written with a change of its record, so one committed after that
 * snapshot means the record changed too, and `change` (re-checked on the
 * newest row) updated nothing.
 */
export function appendChangeSql(change: string): string {
  return `WITH changed AS (${change}),
     added AS (
       INSERT INTO ${HISTORY} (request_id, ${HISTORY_COLUMNS})
       SELECT $1, coalesce(max(seq), 0) + 1, $2, $3, $4, $5, $6, $7, $8 FROM ${HISTORY} WHERE request_id = $1
       HAVING EXISTS (SELECT 1 FROM changed)
       RETURNING seq
     ),
     pruned AS (
       DELETE FROM ${HISTORY} h USING added WHERE h.request_id = $1 AND h.seq > $9 AND h.seq <= added.seq - $10
     )
     SELECT count(*)::integer AS n FROM changed`;
}

/** The request's history, or undefined when there is no such request; rows that do not make a valid history are store_corrupt. */
export async function readHistory(q: Query, requestId: string): Promise<RequestHistory | undefined> {
  const found = await q<HistoryRow & { known: boolean }>(
    `SELECT true AS known, h.seq, h.at, h.from_state, h.to_state, h.event, h.source, h.observed, h.reason_code
       FROM ${SCHEMA}.requests r LEFT JOIN ${HISTORY} h ON h.request_id = r.request_id
      WHERE r.request_id = $1 ORDER BY h.seq`,
    [requestId],
  );
  if (found.rows.length === 0) return undefined;
  const rows = found.rows.filter((row) => row.seq !== null);
  if (rows.length === 0) return NO_HISTORY;
  const entries = rows.map(({ known: _known, ...entry }) => entry);
  const last = entries[entries.length - 1]?.seq ?? 0;
  const history = parseRequestHistory({ entries, dropped: last - entries.length });
  if (history === undefined) throw new MasterRunnerError('store_corrupt', `stored request ${requestId} has a history that is not valid`, { requestId });
  return history;
}
