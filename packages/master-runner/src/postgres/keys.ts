import { MasterRunnerError } from '../errors.js';
import type { AdmissionKey, ClaimKeyOptions, KeyClaim } from '../record-store.js';
import type { Query } from './database.js';
import { SCHEMA } from './schema.js';

/*
 * Idempotency-Keys (record-store.ts, "Admission"): one row per scoped key
 * hash (the primary key), `claimed` with a lease or `bound` to its stored
 * request. claimKey is one transaction: an INSERT … ON CONFLICT DO NOTHING
 * (two concurrent claims of a new key: the second waits for the first to
 * commit and then sees its row), else the row FOR UPDATE and a decision in
 * code. Leases are compared with the caller's clock (`now`), like every time
 * in a record. The create unit binds a claim in the same transaction as the
 * record (see postgres-record-store.ts), so a claimed key whose request has a
 * record never exists here; it is still read as bound, as the file store
 * reads the state a crash between its writes leaves.
 */

const KEYS = `${SCHEMA}.idempotency_keys`;

interface KeyRow {
  readonly fingerprint: string;
  readonly request_id: string;
  readonly state: string;
  readonly lease_until: Date | null;
}

function checkOptions(options: ClaimKeyOptions): void {
  if (!(options.now instanceof Date) || Number.isNaN(options.now.getTime())) {
    throw new MasterRunnerError('invalid_input', 'a key claim needs a valid time');
  }
  if (!Number.isSafeInteger(options.leaseMs) || options.leaseMs <= 0) {
    throw new MasterRunnerError('invalid_input', 'a key claim lease must be a positive whole number of milliseconds');
  }
}

/** How many times a claim is decided again when the row it saw vanished (released or expired meanwhile). */
const MAX_CLAIM_ROUNDS = 3;

export async function claimKey(q: Query, key: AdmissionKey, options: ClaimKeyOptions): Promise<KeyClaim> {
  checkOptions(options);
  const leaseUntil = new Date(options.now.getTime() + options.leaseMs);
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round += 1) {
    const inserted = await q(
      `INSERT INTO ${KEYS} (key_hash, fingerprint, request_id, tenant, actor, state, lease_until)
       VALUES ($1, $2, $3, $4, $5, 'claimed', $6)
       ON CONFLICT (key_hash) DO NOTHING`,
      [key.keyHash, key.fingerprint, options.requestId, key.tenant, key.actor, leaseUntil],
    );
    if (inserted.rowCount === 1) return { kind: 'claimed', requestId: options.requestId };
    const found = await q<KeyRow>(`SELECT fingerprint, request_id, state, lease_until FROM ${KEYS} WHERE key_hash = $1 FOR UPDATE`, [key.keyHash]);
    const row = found.rows[0];
    if (row === undefined) continue; // released or expired between the two statements: try the insert again
    const sameContent = row.fingerprint === key.fingerprint;
    if (row.state === 'bound') return sameContent ? { kind: 'admitted', requestId: row.request_id } : { kind: 'mismatch' };
    if (row.request_id === options.requestId) {
      // The same admission asking again: its claim, its lease renewed.
      if (!sameContent) return { kind: 'mismatch' };
      await q(`UPDATE ${KEYS} SET lease_until = $2 WHERE key_hash = $1`, [key.keyHash, leaseUntil]);
      return { kind: 'claimed', requestId: options.requestId };
    }
    const stored = await q(`SELECT 1 FROM ${SCHEMA}.requests WHERE request_id = $1`, [row.request_id]);
    if (stored.rowCount === 1) return sameContent ? { kind: 'admitted', requestId: row.request_id } : { kind: 'mismatch' };
    const live = row.lease_until !== null && row.lease_until.getTime() > options.now.getTime();
    if (live) return sameContent ? { kind: 'in_flight' } : { kind: 'mismatch' };
    // The claim lapsed with nothing stored: the key is free, whatever it was asked for before.
    await q(`UPDATE ${KEYS} SET fingerprint = $2, request_id = $3, tenant = $4, actor = $5, lease_until = $6 WHERE key_hash = $1`, [
      key.keyHash,
      key.fingerprint,
      options.requestId,
      key.tenant,
      key.actor,
      leaseUntil,
    ]);
    return { kind: 'claimed', requestId: options.requestId };
  }
  throw new MasterRunnerError('store_busy', 'the idempotency key kept changing while it was claimed; retry');
}

export async function releaseKey(q: Query, key: AdmissionKey, requestId: string): Promise<void> {
  await q(`DELETE FROM ${KEYS} WHERE key_hash = $1 AND state = 'claimed' AND request_id = $2`, [key.keyHash, requestId]);
}

export async function expireKeys(q: Query, before: Date): Promise<number> {
  if (!(before instanceof Date) || Number.isNaN(before.getTime())) throw new MasterRunnerError('invalid_input', 'key expiry needs a valid time');
  const removed = await q(`DELETE FROM ${KEYS} WHERE (state = 'bound' AND bound_at < $1) OR (state = 'claimed' AND lease_until < $1)`, [before]);
  return removed.rowCount ?? 0;
}

/**
 * In the create unit: locks the key row and answers whether the claim still
 * belongs to `requestId` (false: it lapsed and was taken, or was released or
 * expired). Locking it holds off a takeover until the unit ends.
 */
export async function holdsClaim(q: Query, key: AdmissionKey, requestId: string): Promise<boolean> {
  const found = await q<KeyRow>(`SELECT fingerprint, request_id, state, lease_until FROM ${KEYS} WHERE key_hash = $1 FOR UPDATE`, [key.keyHash]);
  const row = found.rows[0];
  return row !== undefined && row.state === 'claimed' && row.request_id === requestId && row.fingerprint === key.fingerprint;
}

/** In the create unit, after the record: the key now replays that record. */
export async function bindKey(q: Query, key: AdmissionKey, boundAt: Date): Promise<void> {
  await q(`UPDATE ${KEYS} SET state = 'bound', bound_at = $2, lease_until = NULL WHERE key_hash = $1`, [key.keyHash, boundAt]);
}
