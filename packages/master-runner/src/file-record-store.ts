import { isBlocking, isMinionId, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { ReceiptStoreError, openPrivateDir, type FileLock, type PrivateDir } from '@oduflow/receipt-store';
import { isAbsolute } from 'node:path';
import { crashIfRequested, type StoreCrashPoint } from './crash-points.js';
import { MasterRunnerError } from './errors.js';
import { decodeRecord, encodeRecord } from './record-codec.js';
import { isRecordId, recordFileName, recordIdFromFileName } from './record-id.js';
import type { CreateOutcome, RecordFilter, RecordStore, TargetUnit, UpdateOutcome } from './record-store.js';
import { storeCall } from './store-errors.js';

/*
 * The embedded file store (the default), on @oduflow/receipt-store:
 *
 *   <root>/                               0700, owned by the runner's user, never a symlink
 *     requests/<request_id>.json          the record (protocol 1, or a legacy record kept verbatim)
 *     jids/<jid>.json                     JID index: {"request_id","minion_id"}; created no-replace, never removed
 *     targets/<minion_id>/<request_id>.json  target index: {"request_id","minion_id"}; created no-replace, never removed
 *     unbound/<request_id>.json           index of records that name no target (legacy) or cannot be decoded
 *     locks/target-<minion>.lock          flock for a target's unit (blocking check + create)
 *     locks/request-<id>.lock             flock for a request's unit (read, decide, write)
 *     locks/store.lock                    flock while an opener indexes records that have no index entry
 *
 * Every write is one atomic file operation (temp, fsync, rename, dir fsync).
 * Creating a request is three of them, in this order, under the target lock:
 *   W1  jids/<jid>.json                 no-replace: the JID is reserved for ever
 *   W2  targets/<minion>/<id>.json      the target index entry (an existing one is kept)
 *   W3  requests/<id>.json              no-replace: the record exists
 * A record therefore never exists without its JID entry and its index entry.
 * A SIGKILL after W1 (S1) leaves a burned JID and nothing else; after W2 (S2)
 * a burned JID and an index entry without a record. An index entry is only a
 * pointer: the blocking decision reads the records it points to and keeps
 * those that exist, block, and name this target, so an entry without a record
 * (or pointing to a record of another target, after a lost request-id race)
 * means nothing. The JID is reserved first because the reservation is the
 * check-and-take that decides whether the create goes on: a taken JID writes
 * nothing else, so only a crash or a lost request-id race leaves a dangling
 * index entry. Every later change of a record is a single replace of
 * requests/<id>.json under the request lock; identity (request id, minion id,
 * JID) never changes, so the index never needs updating. The blocking state is
 * derived from the records themselves: there is no second copy of it that a
 * crash could leave out of step. Locks are kernel flocks: a killed holder's
 * lock is released by the kernel, never guessed stale.
 *
 * Cost: a target unit reads only targets/<minion>/ and unbound/ (small: legacy
 * records without a target), so dispatch is independent of the number of
 * records of other targets. Stores written before the target index (and any
 * record some other writer put into requests/ without an entry) are indexed
 * when the store is opened: the opener compares the names in requests/ with
 * the names in the index, and checks that a record found only under targets
 * names one of them (an entry under another target alone — a dangling S2 or
 * lost-race entry — does not index a record bound elsewhere). Under
 * locks/store.lock it then reads just the unindexed records and writes their
 * entries under their own target (no-replace, idempotent; a crash half-way is finished by the next
 * open). A record that cannot be decoded is indexed as unbound, so it still
 * stops every dispatch with store_corrupt (fail closed), as before.
 */

export const DEFAULT_FILE_STORE_ROOT = '/var/lib/oduflow/master';
const DEFAULT_LOCK_WAIT_MS = 30_000;

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
   * Test seam for the boundaries inside a create (S1, S2; see crash-points.ts).
   * Default: SIGKILL this process when ODUFLOW_TEST_CRASH_AT names the point.
   */
  readonly crashAt?: (point: StoreCrashPoint) => void;
}

interface Dirs {
  readonly root: PrivateDir;
  readonly requests: PrivateDir;
  readonly jids: PrivateDir;
  readonly locks: PrivateDir;
  readonly targets: PrivateDir;
  readonly unbound: PrivateDir;
}

const STORE_LOCK = 'store.lock';

function noStore(root: string): MasterRunnerError {
  return new MasterRunnerError('not_found', `there is no record store at ${root}`, { detail: 'no_store' });
}

function isNotFound(error: unknown): boolean {
  return ReceiptStoreError.isInstance(error) && error.code === 'not_found';
}

function openDirs(root: string, create: boolean): Dirs {
  let dir: PrivateDir;
  try {
    dir = openPrivateDir(root, { create });
  } catch (error) {
    if (!create && isNotFound(error)) throw noStore(root);
    throw error;
  }
  if (!create) {
    // A directory without requests/ holds no store yet: leave it untouched.
    try {
      dir.subdir('requests').close();
    } catch (error) {
      dir.close();
      if (isNotFound(error)) throw noStore(root);
      throw error;
    }
  }
  // Every handle opened so far is closed if a later one fails (no fd leak on a refused store).
  const opened: PrivateDir[] = [dir];
  try {
    const open = (name: string): PrivateDir => {
      const sub = dir.subdir(name, { create: true });
      opened.push(sub);
      return sub;
    };
    return {
      root: dir,
      requests: open('requests'),
      jids: open('jids'),
      locks: open('locks'),
      targets: open('targets'),
      unbound: open('unbound'),
    };
  } catch (error) {
    for (const handle of opened.reverse()) handle.close();
    throw error;
  }
}

export async function createFileRecordStore(options: FileRecordStoreOptions = {}): Promise<RecordStore> {
  const root = options.root ?? DEFAULT_FILE_STORE_ROOT;
  if (!isAbsolute(root)) throw new MasterRunnerError('config_invalid', 'the store directory must be an absolute path');
  const lockWaitMs = options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS;
  const dirs = await storeCall('opening the record store', () => openDirs(root, options.create ?? true));
  const store = new FileRecordStore(root, dirs, lockWaitMs, options.crashAt ?? crashIfRequested);
  try {
    await store.indexUnindexedRecords();
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}

function byRequestId(a: RequestRecord, b: RequestRecord): number {
  return a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0;
}

function isAlreadyExists(error: unknown): boolean {
  return ReceiptStoreError.isInstance(error) && error.code === 'already_exists';
}

/** A record that cannot be read as a record (not JSON, damaged, not a private regular file). */
function isUnreadableRecord(error: unknown): boolean {
  if (MasterRunnerError.isInstance(error)) return error.code === 'store_corrupt';
  return ReceiptStoreError.isInstance(error) && (error.code === 'malformed_json' || error.code === 'unsafe_path');
}

class FileRecordStore implements RecordStore {
  readonly location: string;
  readonly #dirs: Dirs;
  readonly #lockWaitMs: number;
  readonly #crashAt: (point: StoreCrashPoint) => void;

  constructor(location: string, dirs: Dirs, lockWaitMs: number, crashAt: (point: StoreCrashPoint) => void) {
    this.location = location;
    this.#dirs = dirs;
    this.#lockWaitMs = lockWaitMs;
    this.#crashAt = crashAt;
  }

  /**
   * Writes the missing index entries of records that have none (a store
   * written before the target index). Run by createFileRecordStore before the
   * store is handed out; returns how many records it indexed. Directory
   * listings only when nothing is missing; idempotent; under the store lock.
   */
  async indexUnindexedRecords(): Promise<number> {
    if ((await storeCall('checking the target index', () => this.#unindexed())).length === 0) return 0;
    const lock = await this.#lock(STORE_LOCK);
    try {
      return await storeCall('indexing records', () => {
        const missing = this.#unindexed(); // again, under the lock: another opener may have done it
        for (const id of missing) this.#indexExisting(id);
        return missing.length;
      });
    } finally {
      lock.release();
    }
  }

  async get(requestId: string): Promise<RequestRecord | undefined> {
    if (!isRecordId(requestId)) return undefined;
    return storeCall('reading a record', () => this.#read(requestId));
  }

  async list(filter: RecordFilter = {}): Promise<RequestRecord[]> {
    const minionId = filter.minionId;
    const records = await storeCall('listing records', () =>
      minionId === undefined ? this.#readAll() : this.#readIds(this.#targetIds(minionId)),
    );
    return records.filter((r) => {
      if (filter.minionId !== undefined && r.minion_id !== filter.minionId) return false;
      if (filter.unresolved === true && !isBlocking(r)) return false;
      if (filter.states !== undefined && !filter.states.includes(r.state)) return false;
      return true;
    });
  }

  async withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T> {
    // The lock file is named from the id: never from one that is not a minion id.
    if (!isMinionId(minionId)) throw new MasterRunnerError('invalid_input', 'not a minion id', { detail: 'invalid_minion_id' });
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
  }

  async updateRequest(requestId: string, decide: (current: RequestRecord) => RequestRecord): Promise<UpdateOutcome> {
    if (!isRecordId(requestId)) throw new MasterRunnerError('not_found', 'no record with that request id');
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
      await storeCall('writing a record', () =>
        this.#dirs.requests.writeJsonAtomic(recordFileName(requestId), encodeRecord(after), { replace: true }),
      );
      return { before, after, changed: true };
    } finally {
      lock.release();
    }
  }

  async close(): Promise<void> {
    const { requests, jids, locks, targets, unbound, root } = this.#dirs;
    for (const dir of [requests, jids, locks, targets, unbound, root]) dir.close();
  }

  async #lock(name: string): Promise<FileLock> {
    return storeCall('locking', () => this.#dirs.locks.lock(name, { wait: this.#lockWaitMs }));
  }

  #read(requestId: string): RequestRecord | undefined {
    const raw = this.#dirs.requests.readJsonIfExists(recordFileName(requestId));
    return raw === undefined ? undefined : decodeRecord(raw, requestId);
  }

  #readAll(): RequestRecord[] {
    return this.#readIds(this.#idsIn(this.#dirs.requests));
  }

  /** The records stored under `ids` (missing ones skipped), in request-id order. */
  #readIds(ids: Iterable<string>): RequestRecord[] {
    const records: RequestRecord[] = [];
    for (const id of new Set(ids)) {
      const record = this.#read(id);
      if (record !== undefined) records.push(record);
    }
    return records.sort(byRequestId);
  }

  /** Record ids named by the entries of `dir` (records, or index entries: same names). */
  #idsIn(dir: PrivateDir): string[] {
    const ids: string[] = [];
    for (const name of dir.list()) {
      const id = recordIdFromFileName(name);
      if (id !== undefined) ids.push(id);
    }
    return ids;
  }

  /** Ids indexed under the target; pointers only (the record may be missing or bound elsewhere). */
  #targetIds(minionId: string): string[] {
    if (!isMinionId(minionId)) return []; // no record can be bound to it
    let dir: PrivateDir;
    try {
      dir = this.#dirs.targets.subdir(minionId);
    } catch (error) {
      if (ReceiptStoreError.isInstance(error) && error.code === 'not_found') return [];
      throw error;
    }
    try {
      return this.#idsIn(dir);
    } finally {
      dir.close();
    }
  }

  #blockers(minionId: string): RequestRecord[] {
    const candidates = [...this.#targetIds(minionId), ...this.#idsIn(this.#dirs.unbound)];
    return this.#readIds(candidates).filter((r) => isBlocking(r) && (r.minion_id === minionId || r.minion_id === null));
  }

  /** Writes the index entry of record `id` (no-replace; an existing entry is kept: the binding never changes). */
  #writeIndex(id: string, minionId: string | null): void {
    const write = (dir: PrivateDir): void => {
      try {
        dir.writeJsonAtomic(recordFileName(id), { request_id: id, minion_id: minionId }, { replace: false });
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
      }
    };
    if (minionId === null) {
      write(this.#dirs.unbound);
      return;
    }
    const dir = this.#dirs.targets.subdir(minionId, { create: true });
    try {
      write(dir);
    } finally {
      dir.close();
    }
  }

  /**
   * Ids of records that have no index entry under their own target (or in
   * unbound/). An entry under another target alone does not count: a dangling
   * entry (S2 crash, lost request-id race) must not hide a record bound to
   * another minion, e.g. one restored into requests/.
   */
  #unindexed(): string[] {
    // Records first: this store writes an entry before its record, so a record
    // listed here has its entry by the time the index is listed below.
    const ids = this.#idsIn(this.#dirs.requests);
    if (ids.length === 0) return [];
    const unbound = new Set(this.#idsIn(this.#dirs.unbound));
    const targetsOf = new Map<string, Set<string>>();
    for (const target of this.#dirs.targets.list()) {
      for (const id of this.#targetIds(target)) {
        const targets = targetsOf.get(id) ?? new Set<string>();
        targets.add(target);
        targetsOf.set(id, targets);
      }
    }
    return ids.filter((id) => {
      if (unbound.has(id)) return false;
      const targets = targetsOf.get(id);
      if (targets === undefined) return true;
      return !this.#indexedUnderOwnTarget(id, targets);
    });
  }

  /** Whether record `id` names one of `targets` (an unreadable or vanished record counts as indexed, as before). */
  #indexedUnderOwnTarget(id: string, targets: ReadonlySet<string>): boolean {
    let record: RequestRecord | undefined;
    try {
      record = this.#read(id);
    } catch (error) {
      if (isUnreadableRecord(error)) return true;
      throw error;
    }
    return record === undefined || (record.minion_id !== null && targets.has(record.minion_id));
  }

  /** Indexes a record that exists without an entry; one that cannot be read blocks every target (fail closed). */
  #indexExisting(id: string): void {
    let minionId: string | null;
    try {
      const record = this.#read(id);
      if (record === undefined) return;
      minionId = record.minion_id;
    } catch (error) {
      if (!isUnreadableRecord(error)) throw error;
      minionId = null;
    }
    this.#writeIndex(id, minionId);
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
    // W2: the target index entry, before the record, so no record is ever unindexed.
    // An entry left by an earlier crashed attempt of the same request is kept.
    this.#writeIndex(record.request_id, minionId);
    this.#crashAt('S2');
    // W3: the record. A request id created concurrently under another target
    // loses here; its reserved JID stays burned and its index entry points to
    // a record of another target, which blockers() ignores: both harmless.
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
