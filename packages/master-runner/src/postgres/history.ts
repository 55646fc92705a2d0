import { HISTORY_HEAD, HISTORY_TAIL, NO_HISTORY, parseRequestHistory, type HistoryEntry, type RequestHistory } from '@oduflow/protocol';
import { MasterRunnerError } from '../errors.js';
import type { Query } from './database.js';
import { SCHEMA } from './schema.js';

/*
 * A request's history as rows of request_history, one per entry, written
 * inside the transaction that writes the record change (createIn and
 * updateRequest), so a rolled-back change takes its entry with it. The cap
 * is kept the same way: the insert of entry n deletes the entry that fell
 * out of the tail (seq n - HISTORY_TAIL, when past the head), so the rows
 * are always the first HISTORY_HEAD and the last HISTORY_TAIL entries and
 * `dropped` is the last seq minus the row count.
 */

const HISTORY = `${SCHEMA}.request_history`;
const COLUMNS = 'seq, at, from_state, to_state, event, source, observed, reason_code';

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

/**
 * Appends the entry for a change of a locked request, numbered after its
 * last one (1 for a request stored before histories; `entry.seq` is not
 * used), and lets go of the entry that fell out of the tail: one statement.
 * The DELETE sees the rows as they were before the INSERT, which is all it
 * needs (it removes an older entry only).
 */
export async function appendEntry(q: Query, requestId: string, entry: HistoryEntry): Promise<void> {
  await q(
    `WITH added AS (
       INSERT INTO ${HISTORY} (request_id, ${COLUMNS})
       SELECT $1, coalesce(max(seq), 0) + 1, $2, $3, $4, $5, $6, $7, $8 FROM ${HISTORY} WHERE request_id = $1
       RETURNING seq
     )
     DELETE FROM ${HISTORY} h USING added WHERE h.request_id = $1 AND h.seq > $9 AND h.seq <= added.seq - $10`,
    [requestId, entry.at, entry.from_state, entry.to_state, entry.event, entry.source, entry.observed, entry.reason_code, HISTORY_HEAD, HISTORY_TAIL],
  );
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
