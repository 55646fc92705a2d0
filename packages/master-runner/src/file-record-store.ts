import { BLOCKING_STATES, isBlocking, isJid, isMinionId, isRequestId, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import type { FileLock, PrivateDir } from '@oduflow/receipt-store';
import type { StoreCrashPoint } from './crash-points.js';
import { MasterRunnerError } from './errors.js';
import { decodeRecord, encodeRecord } from './record-codec.js';
import { isRecordId, recordFileName } from './record-id.js';
import type { CreateOutcome, RecordFilter, RecordStore, ScanOptions, TargetUnit, UpdateOutcome } from './record-store.js';
import { storeCall } from './store-errors.js';
import {
  DEFAULT_LOCK_WAIT_MS,
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
 * Creating a request writes, under the target lock, in this order:
 *   W1  jids/<jid>.json                 no-replace: the JID is reserved for ever     → S1
 *   W2  targets/<minion>/<id>.json      the target's history entry                   → S2
 *   W3  unresolved/<minion>/<id>.json   when the record blocks                       → S3
 *   W4  requests/<id>.json              no-replace: the record exists
 * An index entry is only a pointer: readers read the record it points to and
 * keep it only if it exists, names that target (or none), and blocks. So an
 * entry left by a crash (S2, S3) or by a request id lost to a concurrent
 * create under another target means nothing, and the JID stays burned. The
 * JID goes first because its no-replace write is the check-and-take that
 * decides whether the create goes on.
 *
 * Invariant U: every blocking record has its entry under unresolved/ (in its
 * target's bucket, or _unbound). An update therefore writes the entry BEFORE
 * a record that blocks (an existing entry is kept) and removes it only AFTER
 * the record that stopped blocking is durable (S4 between the two). A crash
 * leaves at worst an entry too many — a record that no longer blocks, read
 * and dropped by every reader — never one too few. migrate-store removes such
 * leftovers. So the blocking check reads only the target's unresolved records
 * and _unbound's, and list({ unresolved }) only the unresolved index: neither
 * depends on how many records the store has ever held.
 *
 * Identity (request id, minion id, JID) never changes, so neither do the
 * history entries. The blocking state is derived from the records themselves;
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
   * Test seam at the store's durable boundaries (S1–S4; see crash-points.ts).
   * Default: nothing. Production code never arms it; tests pass a function
   * that throws or SIGKILLs the process there.
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

function matches(filter: RecordFilter, r: RequestRecord): boolean {
  if (filter.minionId !== undefined && r.minion_id !== filter.minionId) return false;
  if (filter.unresolved === true && !isBlocking(r)) return false;
  if (filter.states !== undefined && !filter.states.includes(r.state)) return false;
  return true;
}

/** Whether every record the filter can return blocks: then the unresolved index holds them all. */
function needsOnlyBlocking(filter: RecordFilter): boolean {
  return filter.unresolved === true || (filter.states !== undefined && filter.states.every((s) => BLOCKING.has(s)));
}

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

  async list(filter: RecordFilter = {}): Promise<RequestRecord[]> {
    const records = await this.#shared(() => storeCall('listing records', () => this.#candidates(filter)));
    return records.filter((r) => matches(filter, r));
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

  async withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T> {
    // The lock file is named from the id: never from one that is not a minion id.
    if (!isMinionId(minionId)) throw new MasterRunnerError('invalid_input', 'not a minion id', { detail: 'invalid_minion_id' });
    return this.#shared(async () => {
      const lock = await this.#lock(`target-${minionId}.lock`);
      try {
        return await work({
          minionId,
          blockers: () => storeCall('checking the target', () => this.#blockers(minionId)),
          create: (record) => storeCall('creating a record', () => this.#create(minionId, record)),
        });
      } finally {
        lock.release();
      }
    });
  }

  async updateRequest(requestId: string, decide: (current: RequestRecord) => RequestRecord): Promise<UpdateOutcome> {
    if (!isRecordId(requestId)) throw new MasterRunnerError('not_found', 'no record with that request id');
    return this.#shared(async () => {
      // Records are never removed, so a record seen here still exists under the
      // lock; a request id without a record never gets a lock file.
      if ((await storeCall('reading a record', () => this.#read(requestId))) === undefined) {
        throw new MasterRunnerError('not_found', 'no record with that request id', { requestId });
      }
      const lock = await this.#lock(`request-${requestId}.lock`);
      try {
        const before = await storeCall('reading a record', () => this.#read(requestId));
        if (before === undefined) throw new MasterRunnerError('not_found', 'no record with that request id', { requestId });
        const after = decide(before);
        if (after === before) return { before, after, changed: false };
        if (after.request_id !== before.request_id || after.jid !== before.jid || after.minion_id !== before.minion_id) {
          throw new MasterRunnerError('internal', 'an update tried to change the identity of a record', { requestId });
        }
        await storeCall('writing a record', () => this.#replace(before, after));
        return { before, after, changed: true };
      } finally {
        lock.release();
      }
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

  #read(requestId: string): RequestRecord | undefined {
    const raw = this.#dirs.requests.readJsonIfExists(recordFileName(requestId));
    return raw === undefined ? undefined : decodeRecord(raw, requestId);
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

  /** What list() reads: the unresolved index when the filter keeps only blocking records. */
  #candidates(filter: RecordFilter): RequestRecord[] {
    if (needsOnlyBlocking(filter)) {
      const buckets = filter.minionId === undefined ? this.#dirs.unresolved.list().filter(isBucket) : [filter.minionId, UNBOUND_BUCKET];
      return this.#readIds(buckets.flatMap((bucket) => this.#entryIds(this.#dirs.unresolved, bucket)));
    }
    if (filter.minionId !== undefined) return this.#readIds(this.#entryIds(this.#dirs.targets, filter.minionId));
    return this.#readIds(idsIn(this.#dirs.requests));
  }

  /**
   * scan()'s candidates as deferred groups of ids: a bucket of the unresolved
   * index or of a target's history (read when its page comes), or one id.
   */
  #candidateGroups(filter: RecordFilter): CandidateGroup[] {
    if (needsOnlyBlocking(filter)) {
      const buckets = filter.minionId === undefined ? this.#dirs.unresolved.list().filter(isBucket) : [filter.minionId, UNBOUND_BUCKET];
      // An entry may point to a record of another bucket (a request id lost to a create under another target): its own bucket yields it.
      return buckets.map((bucket) => ({ ids: () => this.#entryIds(this.#dirs.unresolved, bucket), owns: (r) => bucketOf(r.minion_id) === bucket }));
    }
    if (filter.minionId !== undefined) {
      const minionId = filter.minionId;
      return [{ ids: () => this.#entryIds(this.#dirs.targets, minionId), owns: (r) => r.minion_id === minionId }];
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

  /** Replaces a record, keeping invariant U (the unresolved entry before a blocking record, removed after). */
  #replace(before: RequestRecord, after: RequestRecord): void {
    if (isBlocking(after)) this.#markUnresolved(after);
    this.#dirs.requests.writeJsonAtomic(recordFileName(after.request_id), encodeRecord(after), { replace: true });
    this.#crashAt('S4');
    if (isBlocking(before) && !isBlocking(after)) this.#unmarkUnresolved(after);
  }

  #create(minionId: string, record: ProtocolRequestRecord): CreateOutcome {
    if (record.minion_id !== minionId) throw new MasterRunnerError('internal', 'a record was created under another target');
    const existing = this.#read(record.request_id);
    if (existing !== undefined) return { created: false, reason: 'request_exists', existing };
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
    // W4: the record. A request id created concurrently under another target
    // loses here; its reserved JID stays burned and its entries point to a
    // record of another target, which readers ignore: both harmless.
    try {
      this.#dirs.requests.writeJsonAtomic(recordFileName(record.request_id), encodeRecord(record), { replace: false });
    } catch (error) {
      if (isAlreadyExists(error)) {
        const winner = this.#read(record.request_id);
        if (winner !== undefined) return { created: false, reason: 'request_exists', existing: winner };
      }
      throw error;
    }
    return { created: true, record };
  }
}
