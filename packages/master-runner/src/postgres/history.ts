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

/** The seq of a locked request's next history entry (1 for a request stored before histories). */
export async function nextHistorySeq(q: Query, requestId: string): Promise<number> {
  const found = await q<{ last: number }>(`SELECT coalesce(max(seq), 0)::integer AS last FROM ${HISTORY} WHERE request_id = $1`, [requestId]);
  return (found.rows[0]?.last ?? 0) + 1;
}

/** Inserts `entry` and lets go of the one that fell out of the tail (the rows stay the head and the tail). */
export async function appendEntry(q: Query, requestId: string, entry: HistoryEntry): Promise<void> {
  await q(`INSERT INTO ${HISTORY} (request_id, ${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, [
    requestId,
    entry.seq,
    entry.at,
    entry.from_state,
    entry.to_state,
    entry.event,
    entry.source,
    entry.observed,
    entry.reason_code,
  ]);
  const fellOut = entry.seq - HISTORY_TAIL;
  if (fellOut > HISTORY_HEAD) await q(`DELETE FROM ${HISTORY} WHERE request_id = $1 AND seq > $2 AND seq <= $3`, [requestId, HISTORY_HEAD, fellOut]);
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
