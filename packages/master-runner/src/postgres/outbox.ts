import { MasterRunnerError } from '../errors.js';
import type { ClaimOutboxOptions, OutboxEntry } from '../record-store.js';
import type { Query } from './database.js';
import { SCHEMA } from './schema.js';

/*
 * The outbox: a row per admitted request not yet handed to Salt, the only
 * place state data is kept (and only until publication). A relay claims due
 * rows with FOR UPDATE SKIP LOCKED in one statement that also stamps the
 * lease, so two relays never get the same row: the second skips the rows
 * the first has locked, and a row the first already committed no longer
 * qualifies when it is re-checked under its lock. A claim that lapses is
 * handed out again; what happens to its request then is decided by the
 * record (a relay publishes only a record still `prepared`), never here.
 */

const OUTBOX = `${SCHEMA}.outbox`;

interface OutboxRow {
  readonly request_id: string;
  readonly state_data_json: string;
  readonly enqueued_at: Date;
  readonly attempts: number;
}

function validTime(at: unknown, what: string): Date {
  if (!(at instanceof Date) || Number.isNaN(at.getTime())) throw new MasterRunnerError('invalid_input', `${what} needs a valid time`);
  return at;
}

function byAge(a: OutboxRow, b: OutboxRow): number {
  const age = a.enqueued_at.getTime() - b.enqueued_at.getTime();
  if (age !== 0) return age;
  return a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0;
}

export async function enqueue(q: Query, requestId: string, stateDataJson: string, at: Date): Promise<void> {
  await q(`INSERT INTO ${OUTBOX} (request_id, state_data_json, enqueued_at, due_at) VALUES ($1, $2, $3, $3)`, [requestId, stateDataJson, at]);
}

export async function claimOutbox(q: Query, options: ClaimOutboxOptions): Promise<OutboxEntry[]> {
  const now = validTime(options.now, 'an outbox claim');
  if (!Number.isSafeInteger(options.limit) || options.limit <= 0) throw new MasterRunnerError('invalid_input', 'an outbox claim limit must be a positive integer');
  if (!Number.isSafeInteger(options.leaseMs) || options.leaseMs <= 0) {
    throw new MasterRunnerError('invalid_input', 'an outbox claim lease must be a positive whole number of milliseconds');
  }
  const claimedUntil = new Date(now.getTime() + options.leaseMs);
  const claimed = await q<OutboxRow>(
    `WITH due AS (
       SELECT request_id FROM ${OUTBOX}
       WHERE due_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
       ORDER BY enqueued_at, request_id
       LIMIT $2
       FOR UPDATE SKIP LOCKED
     )
     UPDATE ${OUTBOX} AS o SET claimed_until = $3, attempts = o.attempts + 1
     FROM due WHERE o.request_id = due.request_id
     RETURNING o.request_id, o.state_data_json, o.enqueued_at, o.attempts`,
    [now, options.limit, claimedUntil],
  );
  // RETURNING promises no order.
  return [...claimed.rows].sort(byAge).map((row) => ({
    requestId: row.request_id,
    stateDataJson: row.state_data_json,
    enqueuedAt: row.enqueued_at.toISOString(),
    attempts: row.attempts,
  }));
}

export async function removeOutbox(q: Query, requestId: string): Promise<void> {
  await q(`DELETE FROM ${OUTBOX} WHERE request_id = $1`, [requestId]);
}

export async function deferOutbox(q: Query, requestId: string, at: Date): Promise<void> {
  validTime(at, 'deferring an outbox entry');
  await q(`UPDATE ${OUTBOX} SET due_at = $2, claimed_until = NULL WHERE request_id = $1`, [requestId, at]);
}
