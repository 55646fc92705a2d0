import { isJid, isMinionId, isRequestId, type ProtocolRequestRecord, type RecordChange, type RequestHistory, type RequestRecord, type RequestState } from '@oduflow/protocol';
import { MasterRunnerError } from '../errors.js';
// The same key rules as the file store (one owner): SHA-256 hex hash and fingerprint, printable tenant and actor.
import { checkAdmissionKey as checkKey } from '../file-store-keys.js';
import { changeHistoryEntry, creationHistoryEntry } from '../record-codec.js';
import type {
  AdmissionKey,
  ClaimKeyOptions,
  ClaimOutboxOptions,
  CreateOptions,
  CreateOutcome,
  KeyClaim,
  ListPage,
  OutboxEntry,
  RecordFilter,
  RecordStore,
  ScanOptions,
  TargetUnit,
  UpdateOutcome,
} from '../record-store.js';
import { resolveConnection, type PostgresStoreOptions } from './connection.js';
import { Database, type Query, type UnitScope } from './database.js';
import { limitOf, pageSizeOf, whereOf } from './filters.js';
import { appendChangeSql, appendValues, HISTORY, HISTORY_COLUMNS, historyValues, readHistory } from './history.js';
import { bindKey, claimKey, expireKeys, holdsClaim, releaseKey } from './keys.js';
import { checkSchemaVersion, readSchemaVersion } from './migrate.js';
import { claimOutbox, deferOutbox, enqueue, removeOutbox } from './outbox.js';
import { CallerError, constraintOf, pgCall, sqlStateOf } from './pg-errors.js';
import { RECORD_COLUMNS, decodeRow, rowValues, type RecordRow } from './rows.js';
import { ONE_BLOCKING_PER_TARGET, SCHEMA } from './schema.js';

/*
 * The PostgreSQL RecordStore, for several master instances sharing one
 * database (the file store is the embedded default for one). Each unit of
 * the contract is one transaction:
 *   withTarget     BEGIN; the target's row locked (inserted on first use: one statement); the work; COMMIT
 *   create         (inside it, as a savepoint) the JID row (ON CONFLICT: jid_taken), the request
 *                  row (ON CONFLICT on the id: request_exists; the one-blocking index: target_blocked)
 *                  with its first history row in the same statement, the outbox row and the key
 *                  binding: all or nothing
 *   updateRequest  the record and its row version (one SELECT); decide(); UPDATE with the history
 *                  row (and the one it pushes out of the cap) in one autocommit statement, only if
 *                  the row is still that version; else, once, the locked way: BEGIN; the request
 *                  row FOR UPDATE; decide(); the same statement; COMMIT (inside a unit: only that)
 *   blockersOf     one autocommit SELECT, no lock: the look before a capability call
 * Reads outside a unit are single statements. No unit waits on the
 * network: callers do Salt I/O between units. A row lock waited on for
 * longer than lockTimeoutMs fails store_busy (lock_timeout, 55P03).
 */

const REQUESTS = `${SCHEMA}.requests`;
const TARGETS = `${SCHEMA}.targets`;
const DEFAULT_PAGE_SIZE = 256;

/** Thrown inside a create's savepoint to undo what it wrote, carrying the outcome to report. */
class Undo {
  constructor(readonly outcome: CreateOutcome) {}
}

/** The one-blocking-per-target index refused a write for this target. */
class Blocked {
  constructor(readonly minionId: string) {}
}

type ReadBlockers = (fn: (q: Query) => Promise<ProtocolRequestRecord[]>) => Promise<ProtocolRequestRecord[]>;

function isOneBlockingViolation(error: unknown): boolean {
  return sqlStateOf(error) === '23505' && constraintOf(error) === ONE_BLOCKING_PER_TARGET;
}

async function selectRecord(q: Query, requestId: string, lock = ''): Promise<ProtocolRequestRecord | undefined> {
  const found = await q<RecordRow>(`SELECT ${RECORD_COLUMNS} FROM ${REQUESTS} WHERE request_id = $1 ${lock}`, [requestId]);
  const row = found.rows[0];
  return row === undefined ? undefined : decodeRow(row);
}

async function blockersOf(q: Query, minionId: string): Promise<ProtocolRequestRecord[]> {
  const found = await q<RecordRow>(`SELECT ${RECORD_COLUMNS} FROM ${REQUESTS} WHERE minion_id = $1 AND blocking ORDER BY request_id`, [minionId]);
  return found.rows.map(decodeRow);
}

/**
 * The target's row, locked for the rest of the transaction, created on
 * first use: one statement either way. ON CONFLICT DO UPDATE locks the
 * existing row (the same exclusive tuple lock as FOR UPDATE) even when its
 * WHERE lets no row be updated, so nothing is rewritten; a row this
 * statement inserts is ours until COMMIT. A concurrent first use waits for
 * the other insert, then locks the row it committed. Target rows are never deleted.
 */
async function lockTarget(q: Query, minionId: string): Promise<void> {
  await q(`INSERT INTO ${TARGETS} AS t (minion_id) VALUES ($1) ON CONFLICT (minion_id) DO UPDATE SET minion_id = t.minion_id WHERE false`, [minionId]);
}

async function createIn(q: Query, minionId: string, record: ProtocolRequestRecord, options: CreateOptions | undefined): Promise<CreateOutcome> {
  const first = creationHistoryEntry(record, options?.source ?? 'dispatch');
  const existing = await selectRecord(q, record.request_id);
  if (existing !== undefined) return { created: false, reason: 'request_exists', existing };
  const key = options?.key;
  if (key !== undefined && !(await holdsClaim(q, key, record.request_id))) return { created: false, reason: 'claim_lost' };
  // The JID first: its primary key is the check-and-take.
  const reserved = await q(`INSERT INTO ${SCHEMA}.jids (jid, request_id) VALUES ($1, $2) ON CONFLICT (jid) DO NOTHING`, [record.jid, record.request_id]);
  if (reserved.rowCount !== 1) return { created: false, reason: 'jid_taken' };
  let stored;
  try {
    // The record and its first history entry in one statement (seq 1: a new request has no rows yet); no row
    // is stored when the request id conflicts, so the history INSERT adds nothing either and counts 0.
    stored = await q(
      `WITH stored AS (
         INSERT INTO ${REQUESTS} (request_id, minion_id, jid, state, blocking, record) VALUES ($1, $2, $3, $4, $5, $6::jsonb)
         ON CONFLICT (request_id) DO NOTHING RETURNING request_id
       )
       INSERT INTO ${HISTORY} (request_id, ${HISTORY_COLUMNS}) SELECT request_id, 1, $7, $8, $9, $10, $11, $12, $13 FROM stored`,
      [...rowValues(record), ...historyValues(first)],
    );
  } catch (error) {
    if (isOneBlockingViolation(error)) throw new CallerError(new Blocked(minionId));
    throw error;
  }
  if (stored.rowCount !== 1) {
    // Created meanwhile under another target (its lock is not ours): the JID reserved above is given back.
    const winner = await selectRecord(q, record.request_id);
    if (winner === undefined) throw new MasterRunnerError('internal', 'a request id conflicted with no stored record');
    throw new CallerError(new Undo({ created: false, reason: 'request_exists', existing: winner }));
  }
  const at = new Date(record.created_at);
  if (options?.outbox !== undefined) {
    if (typeof options.outbox.stateDataJson !== 'string') throw new MasterRunnerError('invalid_input', 'outbox state data must be a string');
    await enqueue(q, record.request_id, options.outbox.stateDataJson, at);
  }
  if (key !== undefined) await bindKey(q, key, at);
  return { created: true, record };
}

/**
 * decide() on `before` and, when it changed the record, the record and its
 * history entry written in one statement (appendChangeSql): both or neither.
 * With `version`, only if the row is still that version (xmin): undefined
 * when it is not (another writer committed since `before` was read).
 */
async function writeChange(
  q: Query,
  before: ProtocolRequestRecord,
  decide: (current: RequestRecord) => RequestRecord,
  change: RecordChange,
  version: string | undefined,
): Promise<UpdateOutcome | undefined> {
  const requestId = before.request_id;
  let after: RequestRecord;
  try {
    after = decide(before);
  } catch (error) {
    throw new CallerError(error);
  }
  if (after === before) return { before, after, changed: false };
  if (after.request_id !== before.request_id || after.jid !== before.jid || after.minion_id !== before.minion_id) {
    throw new MasterRunnerError('internal', 'an update tried to change the identity of a record', { requestId });
  }
  const [, , , state, blocking, record] = rowValues(after);
  // Validated here, numbered by the database (appendChangeSql): the seq given is a placeholder.
  const entry = changeHistoryEntry(1, before, after, change);
  const unchangedSince = version === undefined ? '' : ' AND xmin = $14::xid';
  let written;
  try {
    written = await q<{ n: number }>(
      appendChangeSql(`UPDATE ${REQUESTS} SET state = $11, blocking = $12, record = $13::jsonb, written_at = now() WHERE request_id = $1${unchangedSince} RETURNING request_id`),
      [...appendValues(requestId, entry), state, blocking, record, ...(version === undefined ? [] : [version])],
    );
  } catch (error) {
    if (isOneBlockingViolation(error)) throw new CallerError(new Blocked(before.minion_id));
    throw error;
  }
  return written.rows[0]?.n === 1 ? { before, after, changed: true } : undefined;
}

export async function createPostgresRecordStore(options: PostgresStoreOptions): Promise<RecordStore> {
  const connection = resolveConnection(options);
  const db = new Database(connection.pool);
  try {
    const version = await pgCall(`opening the PostgreSQL store ${connection.location}`, () => db.read(readSchemaVersion));
    checkSchemaVersion(connection.location, version);
  } catch (error) {
    await db.close().catch(() => undefined);
    throw error;
  }
  return new PostgresRecordStore(connection.location, db);
}

class PostgresRecordStore implements RecordStore {
  readonly location: string;
  readonly #db: Database;
  #closed = false;

  constructor(location: string, db: Database) {
    this.location = location;
    this.#db = db;
  }

  async get(requestId: string): Promise<RequestRecord | undefined> {
    if (!isRequestId(requestId)) return undefined; // this store holds protocol 1 records only
    return pgCall('reading a record', () => this.#db.read((q) => selectRecord(q, requestId)));
  }

  async getByJid(jid: string): Promise<RequestRecord | undefined> {
    if (!isJid(jid)) return undefined;
    return pgCall('reading a record by JID', () =>
      this.#db.read(async (q) => {
        const found = await q<RecordRow>(`SELECT ${RECORD_COLUMNS} FROM ${REQUESTS} WHERE jid = $1`, [jid]);
        const row = found.rows[0];
        return row === undefined ? undefined : decodeRow(row);
      }),
    );
  }

  async list(filter: RecordFilter = {}, page?: ListPage): Promise<RequestRecord[]> {
    const limit = limitOf(page);
    const where = whereOf(filter, page?.after);
    const bounded = limit === undefined ? '' : ` LIMIT ${limit}`;
    return pgCall('listing records', () =>
      this.#db.read(async (q) => {
        const found = await q<RecordRow>(`SELECT ${RECORD_COLUMNS} FROM ${REQUESTS} ${where.sql} ORDER BY request_id${bounded}`, where.params);
        return found.rows.map(decodeRow);
      }),
    );
  }

  async countUnresolved(): Promise<Partial<Record<RequestState, number>>> {
    return pgCall('counting unresolved records', () =>
      this.#db.read(async (q) => {
        const found = await q<{ state: RequestState; n: number }>(`SELECT state, count(*)::integer AS n FROM ${REQUESTS} WHERE blocking GROUP BY state`);
        return Object.fromEntries(found.rows.map((row) => [row.state, row.n]));
      }),
    );
  }

  /** Keyset pages on the primary key: each page one statement, nothing held between pages. */
  async *scan(filter: RecordFilter = {}, options: ScanOptions = {}): AsyncIterable<readonly RequestRecord[]> {
    const pageSize = pageSizeOf(options.pageSize, DEFAULT_PAGE_SIZE);
    let after: string | undefined;
    for (;;) {
      const page = await this.list(filter, after === undefined ? { limit: pageSize } : { after, limit: pageSize });
      if (page.length > 0) yield page;
      if (page.length < pageSize) return;
      after = page[page.length - 1]?.request_id;
    }
  }

  /** One autocommit SELECT: no transaction, no row lock, no write (inside a unit, on its connection). */
  async blockersOf(minionId: string): Promise<RequestRecord[]> {
    if (!isMinionId(minionId)) throw new MasterRunnerError('invalid_input', 'not a minion id', { detail: 'invalid_minion_id' });
    return pgCall('checking the target', () => this.#db.read((q) => blockersOf(q, minionId)));
  }

  async withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T> {
    if (!isMinionId(minionId)) throw new MasterRunnerError('invalid_input', 'not a minion id', { detail: 'invalid_minion_id' });
    return pgCall('working under the target lock', () =>
      this.#db.unit(
        (q) => lockTarget(q, minionId),
        async (scope) => {
          try {
            return await work(this.#targetUnit(scope, minionId));
          } catch (error) {
            throw new CallerError(error);
          }
        },
      ),
    );
  }

  /**
   * First without a lock, outside a unit: one autocommit SELECT of the
   * record and its row version (xmin), decide(), then one autocommit
   * statement that writes the record and its history entry only if the row
   * is still that version (a concurrent writer's commit changes it; READ
   * COMMITTED re-checks the condition on the newest version). Nothing to
   * change costs the SELECT alone. When another writer got in between, the
   * change is decided again on what it wrote, under the row lock (BEGIN;
   * FOR UPDATE; the same statement; COMMIT), so decide() runs at most twice
   * and no update is ever lost. Inside a unit (its own transaction), the
   * locked way only, as a savepoint: a refused write must not abort the unit.
   */
  async updateRequest(requestId: string, decide: (current: RequestRecord) => RequestRecord, change: RecordChange): Promise<UpdateOutcome> {
    if (!isRequestId(requestId)) throw new MasterRunnerError('not_found', 'no record with that request id');
    try {
      if (!this.#db.inUnit) {
        const optimistic = await pgCall('updating a record', () =>
          this.#db.read(async (q) => {
            const found = await q<RecordRow & { version: string }>(`SELECT ${RECORD_COLUMNS}, xmin::text AS version FROM ${REQUESTS} WHERE request_id = $1`, [requestId]);
            const row = found.rows[0];
            if (row === undefined) throw new MasterRunnerError('not_found', 'no record with that request id', { requestId });
            const { version, ...stored } = row;
            return writeChange(q, decodeRow(stored), decide, change, version);
          }),
        );
        if (optimistic !== undefined) return optimistic;
      }
      return await pgCall('updating a record', () =>
        this.#db.transaction(async (q): Promise<UpdateOutcome> => {
          const before = await selectRecord(q, requestId, 'FOR UPDATE');
          if (before === undefined) throw new MasterRunnerError('not_found', 'no record with that request id', { requestId });
          const outcome = await writeChange(q, before, decide, change, undefined);
          if (outcome === undefined) throw new MasterRunnerError('internal', 'a locked record changed under its lock', { requestId });
          return outcome;
        }),
      );
    } catch (error) {
      if (error instanceof Blocked) throw await this.#blocked((fn) => this.#db.read(fn), error.minionId, requestId);
      throw error;
    }
  }

  async history(requestId: string): Promise<RequestHistory | undefined> {
    if (!isRequestId(requestId)) return undefined;
    return pgCall('reading a history', () => this.#db.read((q) => readHistory(q, requestId)));
  }

  async claimKey(key: AdmissionKey, options: ClaimKeyOptions): Promise<KeyClaim> {
    checkKey(key);
    if (!isRequestId(options.requestId)) throw new MasterRunnerError('invalid_input', 'a key is claimed under a request id', { detail: 'invalid_request_id' });
    return pgCall('claiming an idempotency key', () => this.#db.transaction((q) => claimKey(q, key, options)));
  }

  async releaseKey(key: AdmissionKey, requestId: string): Promise<void> {
    checkKey(key);
    await pgCall('releasing an idempotency key', () => this.#db.read((q) => releaseKey(q, key, requestId)));
  }

  async expireKeys(before: Date): Promise<number> {
    return pgCall('expiring idempotency keys', () => this.#db.read((q) => expireKeys(q, before)));
  }

  async claimOutbox(options: ClaimOutboxOptions): Promise<OutboxEntry[]> {
    return pgCall('claiming outbox entries', () => this.#db.read((q) => claimOutbox(q, options)));
  }

  async removeOutbox(requestId: string): Promise<void> {
    await pgCall('removing an outbox entry', () => this.#db.read((q) => removeOutbox(q, requestId)));
  }

  async deferOutbox(requestId: string, at: Date): Promise<void> {
    await pgCall('deferring an outbox entry', () => this.#db.read((q) => deferOutbox(q, requestId, at)));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#db.close();
  }

  #targetUnit(scope: UnitScope, minionId: string): TargetUnit {
    return {
      minionId,
      blockers: () => pgCall('checking the target', () => scope.read((q) => blockersOf(q, minionId))),
      create: async (record, options) => {
        if (record.minion_id !== minionId) throw new MasterRunnerError('internal', 'a record was created under another target');
        if (options?.key !== undefined) checkKey(options.key);
        try {
          return await pgCall('creating a record', () => scope.transaction((q) => createIn(q, minionId, record, options)));
        } catch (error) {
          if (error instanceof Undo) return error.outcome;
          if (error instanceof Blocked) throw await this.#blocked((fn) => scope.read(fn), error.minionId, record.request_id);
          throw error;
        }
      },
    };
  }

  /** target_blocked, naming the record that holds the target (as dispatch does), read after the refused write was undone. */
  async #blocked(read: ReadBlockers, minionId: string, requestId: string): Promise<MasterRunnerError> {
    const holder = (await pgCall('checking the target', () => read((q) => blockersOf(q, minionId))))[0];
    if (holder === undefined) {
      return new MasterRunnerError('target_blocked', 'the target has another unresolved request; the store refused a second one', { requestId });
    }
    return new MasterRunnerError(
      'target_blocked',
      `the target has an unresolved request (${holder.request_id}, ${holder.state}); the store refused a second one`,
      { requestId: holder.request_id, detail: holder.state },
    );
  }
}
