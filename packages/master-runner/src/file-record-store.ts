import {
  BLOCKING_STATES,
  isBlocking,
  isJid,
  isMinionId,
  isProtocolRecord,
  isRequestId,
  type ProtocolRequestRecord,
  type RecordChange,
  type RequestHistory,
  type RequestRecord,
  type RequestState,
} from '@oduflow/protocol';
import type { FileLock, PrivateDir } from '@oduflow/receipt-store';
import type { StoreCrashPoint } from './crash-points.js';
import { MasterRunnerError } from './errors.js';
import { creationHistoryEntry, decodeHistory, decodeRecord, encodeRecordWithHistory, withChange } from './record-codec.js';
import { isRecordId, recordFileName } from './record-id.js';
import { checkAdmissionKey, keyHashOfFileName, keyLockName, readKeyEntry, removeKeyEntry, writeKeyEntry, type KeyEntry } from './file-store-keys.js';
import {
  byEnqueued,
  isClaimable,
  readOutbox,
  readOutboxEntry,
  removeOutboxEntry,
  toOutboxEntry,
  writeOutboxEntry,
  type OutboxFileEntry,
} from './file-store-outbox.js';
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
} from './record-store.js';
import { storeCall } from './store-errors.js';
import {
  DEFAULT_LOCK_WAIT_MS,
  OUTBOX_LOCK,
  STORE_LOCK,
  UNBOUND_BUCKET,
  bucketOf,
  closeStoreDirs,
  hasEntry,
  idsIn,
  inSubdir,
  isAlreadyExists,
  isBucket,
  isEmptyStore,
  needsMigration,
  openStoreDirs,
  readFormat,
  removeEntry,
  storeRoot,
  unknownFormat,
  writeEntry,
  writeFormat,
  type StoreDirs,
} from './store-format.js';

/*
 * The embedded file store (the default), on @oduflow/receipt-store. Layout:
 * store-format.ts. Every write is one atomic file operation (temp, fsync,
 * rename, dir fsync); locks are kernel flocks, released by the kernel when a
 * holder dies, never guessed stale.
 *
 * Opening reads the format marker and nothing else: no listing, no record.
 * A store without the marker is refused with store_format (needs_migration)
 * unless it holds no record and no JID, in which case the marker is written
 * (a new store needs no step). Every unit holds locks/store.lock shared, so
 * migrate-store (exclusive) never runs beside one.
 *
 * Creating a request writes, under the target lock (and, with a key, the
 * key's lock: always taken after the target's), in this order:
 *   W1  jids/<jid>.json                 no-replace: the JID is reserved for ever     → S1
 *   W2  targets/<minion>/<id>.json      the target's history entry                   → S2
 *   W3  unresolved/<minion>/<id>.json   when the record blocks                       → S3
 *   W3a outbox/<id>.json                when asked (an admission to publish)         → S7
 *   W4  requests/<id>.json              no-replace: the record (and its history) exists → S8 (with a key)
 *   W5  keys/<hash>.json                the key marked bound to the record
 * An index entry is only a pointer: readers read the record it points to and
 * keep it only if it exists, names that target (or none), and blocks. So an
 * entry left by a crash (S2, S3) or by a request id lost to a concurrent
 * create under another target means nothing, and the JID stays burned. The
 * JID goes first because its no-replace write is the check-and-take that
 * decides whether the create goes on.
 *
 * With a key, the unit first checks, under the key lock, that the key is
 * still claimed under this record's request id (claim_lost otherwise, before
 * any write). The record (W4) is what admits: a key still `claimed` whose
 * request id has a record is bound (S8), and an outbox entry is handed out
 * only while a record with its request id and JID exists (S7 leaves one that
 * claimOutbox removes once the target lock proves no create is under way).
 * So the unit is one durable step even though it is six writes: before W4
 * nothing is admitted (the claim lapses, the JID stays burned), from W4 on
 * everything is.
 *
 * Invariant U: every blocking record has its entry under unresolved/ (in its
 * target's bucket, or _unbound). An update therefore writes the entry BEFORE
 * a record that blocks (an existing entry is kept) and removes it only AFTER
 * the record that stopped blocking is durable (S4 between the two). A crash
 * leaves at worst an entry too many — a record that no longer blocks, read
 * and dropped by every reader — never one too few. migrate-store removes such
 * leftovers. So the blocking check reads only the target's unresolved records
 * and _unbound's, and list({ unresolved }) only the unresolved index: neither
 * depends on how many records the store has ever held. Nor do the key and
 * outbox units: a key unit reads one key file (and maybe one record), an
 * outbox claim reads the outbox (the admitted requests not yet published).
 *
 * A request's history lives in its record's file (record-codec.ts): W4
 * writes the record with its creation entry, and every update rewrites the
 * file with the record and its history one entry longer, in the same atomic
 * write. A crash therefore leaves both or neither, and a transition costs
 * no extra write or fsync.
 *
 * Identity (request id, minion id, JID) never changes, so neither do the
 * index entries. The blocking state is derived from the records themselves;
 * the index only says where to look.
 */

export { DEFAULT_FILE_STORE_ROOT } from './store-format.js';

export interface FileRecordStoreOptions {
  /** Absolute path of the store directory; created 0700 when missing. */
  readonly root?: string;
  /** How long a unit waits for a lock held by another worker. */
  readonly lockWaitMs?: number;
  /**
   * Create the store directory when it is missing (default true). With false,
   * a missing directory, or one without requests/, is refused with not_found
   * (detail no_store) and nothing is created: for read-only callers.
   */
  readonly create?: boolean;
  /**
   * Test seam at the store's durable boundaries (S1–S4, S7, S8; see
   * crash-points.ts). Default: nothing. Production code never arms it; tests
   * pass a function that throws or SIGKILLs the process there.
   */
  readonly crashAt?: (point: StoreCrashPoint) => void;
}

const noCrash = (): void => undefined;

export async function createFileRecordStore(options: FileRecordStoreOptions = {}): Promise<RecordStore> {
  const root = storeRoot(options.root);
  const dirs = await storeCall('opening the record store', () => openStoreDirs(root, { create: options.create ?? true, sweep: false }));
  const store = new FileRecordStore(root, dirs, options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS, options.crashAt ?? noCrash);
  try {
    await store.checkFormat();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

function byRequestId(a: RequestRecord, b: RequestRecord): number {
  return a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0;
}

const BLOCKING: ReadonlySet<string> = new Set(BLOCKING_STATES);

const DEFAULT_PAGE_SIZE = 256;

/** Ids to read when their page comes, and which of the records they name this group yields. */
interface CandidateGroup {
  readonly ids: () => string[];
  readonly owns: (record: RequestRecord) => boolean;
}

/** The targets a filter names (minionId and minionIds both: the ones in both), or undefined: every target. */
function targetsOf(filter: RecordFilter): readonly string[] | undefined {
  const { minionId, minionIds } = filter;
  if (minionIds === undefined) return minionId === undefined ? undefined : [minionId];
  const unique = [...new Set(minionIds)];
  return minionId === undefined ? unique : unique.filter((id) => id === minionId);
}

function matches(filter: RecordFilter, r: RequestRecord): boolean {
  if (filter.minionId !== undefined && r.minion_id !== filter.minionId) return false;
  if (filter.minionIds !== undefined && (r.minion_id === null || !filter.minionIds.includes(r.minion_id))) return false;
  if (filter.unresolved === true && !isBlocking(r)) return false;
  if (filter.states !== undefined && !filter.states.includes(r.state)) return false;
  return true;
}

/** Whether every record the filter can return blocks: then the unresolved index holds them all. */
function needsOnlyBlocking(filter: RecordFilter): boolean {
  return filter.unresolved === true || (filter.states !== undefined && filter.states.every((s) => BLOCKING.has(s)));
}

function checkPage(page: ListPage): void {
  const fields = page as Record<string, unknown>;
  const after = fields['after'];
  const limit = fields['limit'];
  if ((after !== undefined && typeof after !== 'string') || (limit !== undefined && (!Number.isSafeInteger(limit) || (limit as number) <= 0))) {
    throw new MasterRunnerError('invalid_input', 'a page needs a request id to start after and a positive whole limit', { detail: 'invalid_page' });
  }
}

function checkInstant(at: unknown, what: string): number {
  const ms = at instanceof Date ? at.getTime() : Number.NaN;
  if (!Number.isFinite(ms)) throw new MasterRunnerError('invalid_input', `${what} must be a valid date`);
  return ms;
}

function checkPositive(value: unknown, what: string): number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) throw new MasterRunnerError('invalid_input', `${what} must be a positive whole number`);
  return value as number;
}

/** What a key's entry means now: its record decides, then its lease. */
type KeyStanding = { readonly kind: 'bound'; readonly boundAt: string } | { readonly kind: 'live' } | { readonly kind: 'lapsed' };

class FileRecordStore implements RecordStore {
  readonly location: string;
  readonly #dirs: StoreDirs;
  readonly #lockWaitMs: number;
  readonly #crashAt: (point: StoreCrashPoint) => void;

  constructor(location: string, dirs: StoreDirs, lockWaitMs: number, crashAt: (point: StoreCrashPoint) => void) {
    this.location = location;
    this.#dirs = dirs;
    this.#lockWaitMs = lockWaitMs;
    this.#crashAt = crashAt;
  }

  /** Accepts a marked store; marks an empty one; refuses any other (see store-format.ts). */
  async checkFormat(): Promise<void> {
    await this.#shared(() =>
      storeCall('checking the store format', () => {
        const format = readFormat(this.#dirs.root);
        if (format === 'current') return;
        if (format === 'unknown') throw unknownFormat(this.location);
        // Lists requests/ and jids/: only a store that is empty or needs migrating gets here.
        if (!isEmptyStore(this.#dirs)) throw needsMigration(this.location);
        writeFormat(this.#dirs.root);
      }),
    );
  }

  async get(requestId: string): Promise<RequestRecord | undefined> {
    if (!isRecordId(requestId)) return undefined;
    return storeCall('reading a record', () => this.#read(requestId));
  }

  async getByJid(jid: string): Promise<RequestRecord | undefined> {
    if (!isJid(jid)) return undefined;
    return storeCall('reading a record by JID', () => {
      const entry = this.#dirs.jids.readJsonIfExists(`${jid}.json`);
      const requestId = typeof entry === 'object' && entry !== null ? (entry as Record<string, unknown>)['request_id'] : undefined;
      if (typeof requestId !== 'string' || !isRequestId(requestId)) return undefined;
      // A JID whose create lost (S1, or a request id taken under another target) names a record bound to another JID.
      const record = this.#read(requestId);
      return record?.jid === jid ? record : undefined;
    });
  }

  /**
   * The candidates' names are listed (and sorted) first; records are read in
   * request-id order from `page.after` on, and the reading stops once
   * `page.limit` records matched: a page costs the records it returns (and
   * those it skips), not the store.
   */
  async list(filter: RecordFilter = {}, page: ListPage = {}): Promise<RequestRecord[]> {
    checkPage(page);
    const limit = page.limit ?? Number.POSITIVE_INFINITY;
    return this.#shared(() =>
      storeCall('listing records', () => {
        const after = page.after;
        const ids = this.#candidateIds(filter).filter((id) => after === undefined || id > after);
        const records: RequestRecord[] = [];
        for (const id of ids) {
          if (records.length >= limit) break;
          const record = this.#read(id);
          if (record !== undefined && matches(filter, record)) records.push(record);
        }
        return records;
      }),
    );
  }

  async countUnresolved(): Promise<Partial<Record<RequestState, number>>> {
    const records = await this.#shared(() => storeCall('counting unresolved records', () => this.#readIds(this.#candidateIds({ unresolved: true }))));
    const counts: Partial<Record<RequestState, number>> = {};
    for (const record of records) {
      if (isBlocking(record)) counts[record.state] = (counts[record.state] ?? 0) + 1;
    }
    return counts;
  }

  /**
   * Walks the same candidates as list() a page at a time: the directory
   * names are read once (a name per candidate, ~100 bytes), the records only
   * page by page, each page under the store lock (shared) and nothing held
   * while the caller works.
   */
  async *scan(filter: RecordFilter = {}, options: ScanOptions = {}): AsyncIterable<readonly RequestRecord[]> {
    const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(pageSize) || pageSize <= 0) throw new MasterRunnerError('invalid_input', 'the page size must be a positive integer');
    const groups = await this.#shared(() => storeCall('listing records', () => this.#candidateGroups(filter)));
    let page: RequestRecord[] = [];
    for (let next = 0; next < groups.length; ) {
      const batch = groups.slice(next, next + pageSize);
      next += batch.length;
      const records = await this.#shared(() =>
        storeCall('listing records', () => batch.flatMap((group) => this.#readIds(group.ids()).filter(group.owns))),
      );
      for (const record of records) {
        if (!matches(filter, record)) continue;
        page.push(record);
        if (page.length >= pageSize) {
          yield page;
          page = [];
        }
      }
    }
    if (page.length > 0) yield page;
  }

  /**
   * The target lock is not taken: invariant U puts a blocking record's
   * unresolved entry before the record, and every file is replaced by an
   * atomic rename, so a lockless read sees each record whole, either as it
   * was or as it is. A create under way may be missed (reserve decides again under the lock).
   */
  async blockersOf(minionId: string): Promise<RequestRecord[]> {
    if (!isMinionId(minionId)) throw new MasterRunnerError('invalid_input', 'not a minion id', { detail: 'invalid_minion_id' });
    return this.#shared(() => storeCall('checking the target', () => this.#blockers(minionId)));
  }

  async withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T> {
    // The lock file is named from the id: never from one that is not a minion id.
    if (!isMinionId(minionId)) throw new MasterRunnerError('invalid_input', 'not a minion id', { detail: 'invalid_minion_id' });
    return this.#shared(async () => {
      const lock = await this.#lock(`target-${minionId}.lock`);
      try {
        return await work({
          minionId,
          blockers: () => storeCall('checking the target', () => this.#blockers(minionId)),
          create: (record, options) => this.#createUnit(minionId, record, options ?? {}),
        });
      } finally {
        lock.release();
      }
    });
  }

  async updateRequest(requestId: string, decide: (current: RequestRecord) => RequestRecord, change: RecordChange): Promise<UpdateOutcome> {
    if (!isRecordId(requestId)) throw new MasterRunnerError('not_found', 'no record with that request id');
    return this.#shared(async () => {
      // Records are never removed, so a record seen here still exists under the
      // lock; a request id without a record never gets a lock file.
      if ((await storeCall('reading a record', () => this.#read(requestId))) === undefined) {
        throw new MasterRunnerError('not_found', 'no record with that request id', { requestId });
      }
      const lock = await this.#lock(`request-${requestId}.lock`);
      try {
        const stored = await storeCall('reading a record', () => this.#readStored(requestId));
        if (stored === undefined) throw new MasterRunnerError('not_found', 'no record with that request id', { requestId });
        const before = stored.record;
        const after = decide(before);
        if (after === before) return { before, after, changed: false };
        if (after.request_id !== before.request_id || after.jid !== before.jid || after.minion_id !== before.minion_id) {
          throw new MasterRunnerError('internal', 'an update tried to change the identity of a record', { requestId });
        }
        await storeCall('writing a record', () => this.#replace(before, after, withChange(decodeHistory(stored.raw, requestId), before, after, change)));
        return { before, after, changed: true };
      } finally {
        lock.release();
      }
    });
  }

  async history(requestId: string): Promise<RequestHistory | undefined> {
    if (!isRecordId(requestId)) return undefined;
    return this.#shared(() =>
      storeCall('reading a history', () => {
        const stored = this.#readStored(requestId);
        return stored === undefined ? undefined : decodeHistory(stored.raw, requestId);
      }),
    );
  }

  async claimKey(key: AdmissionKey, options: ClaimKeyOptions): Promise<KeyClaim> {
    checkAdmissionKey(key);
    if (!isRequestId(options.requestId)) throw new MasterRunnerError('invalid_input', 'a key is claimed under a request id', { detail: 'invalid_request_id' });
    const now = checkInstant(options.now, 'the claim time');
    const leaseMs = checkPositive(options.leaseMs, 'a key lease');
    return this.#underKey(key.keyHash, 'claiming an idempotency key', (): KeyClaim => {
      const entry = readKeyEntry(this.#dirs.keys, key.keyHash);
      const standing = entry === undefined ? undefined : this.#standing(entry, now);
      if (entry !== undefined && standing !== undefined && standing.kind !== 'lapsed') {
        if (entry.fingerprint !== key.fingerprint) return { kind: 'mismatch' };
        if (standing.kind === 'bound') return { kind: 'admitted', requestId: entry.request_id };
        if (entry.request_id !== options.requestId) return { kind: 'in_flight' };
      }
      // Free, lapsed with nothing stored, or this very claim again (its lease renewed).
      writeKeyEntry(this.#dirs.keys, {
        key_hash: key.keyHash,
        fingerprint: key.fingerprint,
        request_id: options.requestId,
        tenant: key.tenant,
        actor: key.actor,
        state: 'claimed',
        lease_until: new Date(now + leaseMs).toISOString(),
        bound_at: null,
      });
      return { kind: 'claimed', requestId: options.requestId };
    });
  }

  async releaseKey(key: AdmissionKey, requestId: string): Promise<void> {
    checkAdmissionKey(key);
    await this.#underKey(key.keyHash, 'releasing an idempotency key', () => {
      const entry = readKeyEntry(this.#dirs.keys, key.keyHash);
      // Only this admission's own claim, and only while it stored nothing.
      if (entry === undefined || entry.state !== 'claimed' || entry.request_id !== requestId) return;
      if (this.#read(entry.request_id) !== undefined) return;
      removeKeyEntry(this.#dirs.keys, key.keyHash);
    });
  }

  async expireKeys(before: Date): Promise<number> {
    const cutoff = checkInstant(before, 'the expiry time');
    const hashes = await this.#shared(() =>
      storeCall('listing idempotency keys', () => this.#dirs.keys.list().flatMap((name) => keyHashOfFileName(name) ?? [])),
    );
    let expired = 0;
    for (const hash of hashes) {
      const removed = await this.#underKey(hash, 'expiring an idempotency key', () => {
        const entry = readKeyEntry(this.#dirs.keys, hash);
        if (entry === undefined) return false;
        const standing = this.#standing(entry, cutoff);
        // Bound: kept until its binding is older than the cutoff. Claimed: until its lease ended before it.
        const old = standing.kind === 'bound' ? Date.parse(standing.boundAt) < cutoff : Date.parse(entry.lease_until) < cutoff;
        if (old) removeKeyEntry(this.#dirs.keys, hash);
        return old;
      });
      if (removed) expired += 1;
    }
    return expired;
  }

  async claimOutbox(options: ClaimOutboxOptions): Promise<OutboxEntry[]> {
    const limit = checkPositive(options.limit, 'an outbox claim limit');
    const now = checkInstant(options.now, 'the claim time');
    const leaseMs = checkPositive(options.leaseMs, 'an outbox lease');
    const { claimed, orphans } = await this.#underOutbox('claiming outbox entries', () => {
      const due = readOutbox(this.#dirs.outbox)
        .filter((entry) => isClaimable(entry, now))
        .sort(byEnqueued);
      const taken: OutboxEntry[] = [];
      const missing: OutboxFileEntry[] = [];
      for (const entry of due) {
        if (taken.length >= limit) break;
        // Handed out only while its record exists: before W4 the create may still be running (or died at S7).
        if (this.#read(entry.request_id)?.jid !== entry.jid) {
          missing.push(entry);
          continue;
        }
        const next = { ...entry, attempts: entry.attempts + 1, claimed_until: new Date(now + leaseMs).toISOString() };
        writeOutboxEntry(this.#dirs.outbox, next);
        taken.push(toOutboxEntry(next));
      }
      return { claimed: taken, orphans: missing };
    });
    for (const orphan of orphans) await this.#dropIfOrphan(orphan);
    return claimed;
  }

  async removeOutbox(requestId: string): Promise<void> {
    if (!isRequestId(requestId)) return; // no entry is ever named otherwise
    await this.#underOutbox('removing an outbox entry', () => removeOutboxEntry(this.#dirs.outbox, requestId));
  }

  async deferOutbox(requestId: string, at: Date): Promise<void> {
    const due = checkInstant(at, 'the time an outbox entry is due');
    if (!isRequestId(requestId)) return;
    await this.#underOutbox('deferring an outbox entry', () => {
      const entry = readOutboxEntry(this.#dirs.outbox, requestId);
      if (entry === undefined) return;
      writeOutboxEntry(this.#dirs.outbox, { ...entry, due_at: new Date(due).toISOString(), claimed_until: null });
    });
  }

  // Async so that a failure to close rejects, as RecordStore.close promises.
  // eslint-disable-next-line @typescript-eslint/require-await -- see above
  async close(): Promise<void> {
    closeStoreDirs(this.#dirs);
  }

  async #lock(name: string, options: { readonly shared?: boolean } = {}): Promise<FileLock> {
    return storeCall('locking', () => this.#dirs.locks.lock(name, { wait: this.#lockWaitMs, shared: options.shared === true }));
  }

  /** Runs `work` holding the store lock shared: never beside a migration. */
  async #shared<T>(work: () => Promise<T>): Promise<T> {
    const lock = await this.#lock(STORE_LOCK, { shared: true });
    try {
      return await work();
    } finally {
      lock.release();
    }
  }

  /** Runs a synchronous key unit under the key's lock (taken alone, or after a target's: never before one). */
  async #underKey<T>(keyHash: string, what: string, work: () => T): Promise<T> {
    return this.#shared(async () => {
      const lock = await this.#lock(keyLockName(keyHash));
      try {
        return await storeCall(what, work);
      } finally {
        lock.release();
      }
    });
  }

  /** Runs a synchronous outbox unit under the outbox lock (taken alone, or after a target's: never before one). */
  async #underOutbox<T>(what: string, work: () => T): Promise<T> {
    return this.#shared(async () => {
      const lock = await this.#lock(OUTBOX_LOCK);
      try {
        return await storeCall(what, work);
      } finally {
        lock.release();
      }
    });
  }

  /** Whether a key is bound (its record exists), claimed under a live lease, or free again. */
  #standing(entry: KeyEntry, now: number): KeyStanding {
    if (entry.state === 'bound' && entry.bound_at !== null) return { kind: 'bound', boundAt: entry.bound_at };
    const record = this.#read(entry.request_id);
    if (record !== undefined) {
      // Cut between W4 and W5 (S8): the record admitted it. Mark it bound now, as W5 would have.
      const boundAt = isProtocolRecord(record) ? record.created_at : entry.lease_until;
      writeKeyEntry(this.#dirs.keys, { ...entry, state: 'bound', bound_at: boundAt });
      return { kind: 'bound', boundAt };
    }
    return Date.parse(entry.lease_until) > now ? { kind: 'live' } : { kind: 'lapsed' };
  }

  /**
   * An outbox entry without its record: a create under way (between W3a and
   * W4) or one that died there (S7) or lost its request id. The target lock
   * tells them apart — no create of that target runs while it is held — so
   * the entry is removed only when, under it, its record is still missing.
   */
  async #dropIfOrphan(entry: OutboxFileEntry): Promise<void> {
    try {
      await this.#shared(async () => {
        const lock = await this.#lock(`target-${entry.minion_id}.lock`);
        try {
          if ((await storeCall('reading a record', () => this.#read(entry.request_id)))?.jid === entry.jid) return;
          const lockOutbox = await this.#lock(OUTBOX_LOCK);
          try {
            await storeCall('removing an outbox entry', () => {
              // Only the entry seen, not one a later create of the same request id wrote.
              if (readOutboxEntry(this.#dirs.outbox, entry.request_id)?.jid === entry.jid) removeOutboxEntry(this.#dirs.outbox, entry.request_id);
            });
          } finally {
            lockOutbox.release();
          }
        } finally {
          lock.release();
        }
      });
    } catch (error) {
      // A busy target only delays the clean-up to the next claim; the entry is never handed out meanwhile.
      if (!(MasterRunnerError.isInstance(error) && error.code === 'store_busy')) throw error;
    }
  }

  #read(requestId: string): RequestRecord | undefined {
    const raw = this.#dirs.requests.readJsonIfExists(recordFileName(requestId));
    return raw === undefined ? undefined : decodeRecord(raw, requestId);
  }

  /** The record and what its file holds (the history beside it), read once. */
  #readStored(requestId: string): { readonly record: RequestRecord; readonly raw: unknown } | undefined {
    const raw = this.#dirs.requests.readJsonIfExists(recordFileName(requestId));
    return raw === undefined ? undefined : { record: decodeRecord(raw, requestId), raw };
  }

  /** The records stored under `ids` (missing ones skipped, duplicates once), in request-id order. */
  #readIds(ids: Iterable<string>): RequestRecord[] {
    const records: RequestRecord[] = [];
    for (const id of new Set(ids)) {
      const record = this.#read(id);
      if (record !== undefined) records.push(record);
    }
    return records.sort(byRequestId);
  }

  /**
   * The ids list() reads, sorted and each once: the unresolved index when the
   * filter keeps only blocking records, the named targets' histories, or
   * every record. Pointers only: the record may be missing, bound elsewhere or settled.
   */
  #candidateIds(filter: RecordFilter): string[] {
    const targets = targetsOf(filter);
    let ids: string[];
    if (needsOnlyBlocking(filter)) {
      // A record of a named target is in its bucket (invariant U); _unbound's name no target, so no filter by target keeps them.
      const buckets = targets ?? this.#dirs.unresolved.list().filter(isBucket);
      ids = buckets.flatMap((bucket) => this.#entryIds(this.#dirs.unresolved, bucket));
    } else if (targets !== undefined) {
      ids = targets.flatMap((minionId) => this.#entryIds(this.#dirs.targets, minionId));
    } else {
      ids = idsIn(this.#dirs.requests);
    }
    return [...new Set(ids)].sort();
  }

  /**
   * scan()'s candidates as deferred groups of ids: a bucket of the unresolved
   * index or of a target's history (read when its page comes), or one id.
   */
  #candidateGroups(filter: RecordFilter): CandidateGroup[] {
    const targets = targetsOf(filter);
    if (needsOnlyBlocking(filter)) {
      const buckets = targets ?? this.#dirs.unresolved.list().filter(isBucket);
      // An entry may point to a record of another bucket (a request id lost to a create under another target): its own bucket yields it.
      return buckets.map((bucket) => ({ ids: () => this.#entryIds(this.#dirs.unresolved, bucket), owns: (r) => bucketOf(r.minion_id) === bucket }));
    }
    if (targets !== undefined) {
      return targets.map((minionId) => ({ ids: () => this.#entryIds(this.#dirs.targets, minionId), owns: (r) => r.minion_id === minionId }));
    }
    return idsIn(this.#dirs.requests).map((id) => ({ ids: () => [id], owns: () => true }));
  }

  /** Ids listed under `parent/<bucket>/`; pointers only (the record may be missing, bound elsewhere or settled). */
  #entryIds(parent: PrivateDir, bucket: string): string[] {
    if (!isBucket(bucket)) return []; // no record is ever indexed there
    return inSubdir(parent, bucket, false, idsIn, []);
  }

  #blockers(minionId: string): RequestRecord[] {
    const candidates = [...this.#entryIds(this.#dirs.unresolved, minionId), ...this.#entryIds(this.#dirs.unresolved, UNBOUND_BUCKET)];
    return this.#readIds(candidates).filter((r) => isBlocking(r) && (r.minion_id === minionId || r.minion_id === null));
  }

  /** Adds the unresolved entry of a record (kept when it exists). */
  #markUnresolved(record: RequestRecord): void {
    inSubdir(this.#dirs.unresolved, bucketOf(record.minion_id), true, (dir) => {
      if (!hasEntry(dir, record.request_id)) writeEntry(dir, record.request_id, record.minion_id);
    }, undefined);
  }

  #unmarkUnresolved(record: RequestRecord): void {
    inSubdir(this.#dirs.unresolved, bucketOf(record.minion_id), false, (dir) => removeEntry(dir, record.request_id), undefined);
  }

  /** Replaces a record and its history in one write, keeping invariant U (the unresolved entry before a blocking record, removed after). */
  #replace(before: RequestRecord, after: RequestRecord, history: RequestHistory): void {
    // A record that blocked already has its entry (invariant U), in the same bucket (its target never changes):
    // a poll's running → running commit needs no bucket opened and no entry read.
    if (isBlocking(after) && !isBlocking(before)) this.#markUnresolved(after);
    this.#dirs.requests.writeJsonAtomic(recordFileName(after.request_id), encodeRecordWithHistory(after, history), { replace: true });
    this.#crashAt('S4');
    if (isBlocking(before) && !isBlocking(after)) this.#unmarkUnresolved(after);
  }

  /** The create unit (the target lock is held): with a key, under its lock too, taken second. */
  async #createUnit(minionId: string, record: ProtocolRequestRecord, options: CreateOptions): Promise<CreateOutcome> {
    const key = options.key;
    if (key === undefined) return storeCall('creating a record', () => this.#create(minionId, record, options));
    checkAdmissionKey(key);
    const lock = await this.#lock(keyLockName(key.keyHash));
    try {
      return await storeCall('creating a record', () => this.#create(minionId, record, options));
    } finally {
      lock.release();
    }
  }

  #create(minionId: string, record: ProtocolRequestRecord, options: CreateOptions): CreateOutcome {
    if (record.minion_id !== minionId) throw new MasterRunnerError('internal', 'a record was created under another target');
    const existing = this.#read(record.request_id);
    if (existing !== undefined) return { created: false, reason: 'request_exists', existing };
    const history: RequestHistory = { entries: [creationHistoryEntry(record, options.source ?? 'dispatch')], dropped: 0 };
    const claim = options.key === undefined ? undefined : readKeyEntry(this.#dirs.keys, options.key.keyHash);
    if (options.key !== undefined) {
      // Still this admission's claim (a lapsed one not yet taken by another is): else store nothing.
      if (claim === undefined || claim.state !== 'claimed' || claim.request_id !== record.request_id) return { created: false, reason: 'claim_lost' };
      if (claim.fingerprint !== options.key.fingerprint) throw new MasterRunnerError('internal', 'a key was bound with another fingerprint than it was claimed with');
    }
    try {
      // W1: reserve the JID for ever (no-replace makes the check-and-take one step).
      this.#dirs.jids.writeJsonAtomic(`${record.jid}.json`, { request_id: record.request_id, minion_id: minionId }, { replace: false });
    } catch (error) {
      if (isAlreadyExists(error)) return { created: false, reason: 'jid_taken' };
      throw error;
    }
    this.#crashAt('S1');
    // W2, W3: the index entries, before the record, so no record is ever unindexed.
    // Entries left by an earlier crashed attempt of the same request are kept.
    inSubdir(this.#dirs.targets, minionId, true, (dir) => writeEntry(dir, record.request_id, minionId), false);
    this.#crashAt('S2');
    if (isBlocking(record)) this.#markUnresolved(record);
    this.#crashAt('S3');
    if (options.outbox !== undefined) {
      // W3a: before the record, so an admitted record always has its entry. One left
      // by an earlier attempt of this request id (S7) is replaced: it names another JID.
      writeOutboxEntry(this.#dirs.outbox, {
        request_id: record.request_id,
        minion_id: minionId,
        jid: record.jid,
        state_data_json: options.outbox.stateDataJson,
        enqueued_at: record.created_at,
        attempts: 0,
        due_at: null,
        claimed_until: null,
      });
      this.#crashAt('S7');
    }
    // W4: the record. A request id created concurrently under another target
    // loses here; its reserved JID stays burned and its entries point to a
    // record of another target, which readers ignore: both harmless.
    try {
      this.#dirs.requests.writeJsonAtomic(recordFileName(record.request_id), encodeRecordWithHistory(record, history), { replace: false });
    } catch (error) {
      if (isAlreadyExists(error)) {
        const winner = this.#read(record.request_id);
        if (winner !== undefined) return { created: false, reason: 'request_exists', existing: winner };
      }
      throw error;
    }
    if (claim !== undefined) {
      this.#crashAt('S8');
      // W5: the key bound. Until it is durable the record already binds it (see #standing).
      writeKeyEntry(this.#dirs.keys, { ...claim, state: 'bound', bound_at: record.created_at });
    }
    return { created: true, record };
  }
}
