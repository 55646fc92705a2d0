import { isBlocking, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { ReceiptStoreError, openPrivateDir, type FileLock, type PrivateDir } from '@oduflow/receipt-store';
import { isAbsolute } from 'node:path';
import { MasterRunnerError } from './errors.js';
import { decodeRecord, encodeRecord } from './record-codec.js';
import { isRecordId, recordFileName, recordIdFromFileName } from './record-id.js';
import type { CreateOutcome, RecordFilter, RecordStore, TargetUnit, UpdateOutcome } from './record-store.js';
import { storeCall } from './store-errors.js';

/*
 * The embedded file store (the default), on @oduflow/receipt-store:
 *
 *   <root>/                      0700, owned by the runner's user, never a symlink
 *     requests/<request_id>.json the record (protocol 1, or a legacy record kept verbatim)
 *     jids/<jid>.json            JID index: {"request_id","minion_id"}; created no-replace, never removed
 *     locks/target-<minion>.lock flock for a target's unit (blocking check + create)
 *     locks/request-<id>.lock    flock for a request's unit (read, decide, write)
 *
 * Every write is one atomic file operation (temp, fsync, rename, dir fsync).
 * Creating a request is two of them, in this order, under the target lock:
 *   W1  jids/<jid>.json       no-replace: the JID is reserved for ever
 *   W2  requests/<id>.json    no-replace: the record exists
 * A SIGKILL between W1 and W2 leaves a JID index without a record: the JID is
 * burned (never chosen again) and no record exists, so nothing was or will be
 * published under it. Every later change of a record is a single replace of
 * requests/<id>.json under the request lock, so a crash leaves either the old
 * or the new record. The per-target blocking state is derived from the records
 * themselves under the target lock, so there is no second copy that a crash
 * could leave out of step. Locks are kernel flocks: a killed holder's lock is
 * released by the kernel, never guessed stale.
 *
 * Cost: the blocking check reads the records (legacy records, written before
 * this runner, name their target only inside the file). That is linear in the
 * number of records; the PostgreSQL store answers it from an index.
 */

export const DEFAULT_FILE_STORE_ROOT = '/var/lib/oduflow/master';
const DEFAULT_LOCK_WAIT_MS = 30_000;

export interface FileRecordStoreOptions {
  /** Absolute path of the store directory; created 0700 when missing. */
  readonly root?: string;
  /** How long a unit waits for a lock held by another worker. */
  readonly lockWaitMs?: number;
}

interface Dirs {
  readonly root: PrivateDir;
  readonly requests: PrivateDir;
  readonly jids: PrivateDir;
  readonly locks: PrivateDir;
}

function openDirs(root: string): Dirs {
  const dir = openPrivateDir(root, { create: true });
  // Every handle opened so far is closed if a later one fails (no fd leak on a refused store).
  const opened: PrivateDir[] = [dir];
  try {
    const open = (name: string): PrivateDir => {
      const sub = dir.subdir(name, { create: true });
      opened.push(sub);
      return sub;
    };
    return { root: dir, requests: open('requests'), jids: open('jids'), locks: open('locks') };
  } catch (error) {
    for (const handle of opened.reverse()) handle.close();
    throw error;
  }
}

export async function createFileRecordStore(options: FileRecordStoreOptions = {}): Promise<RecordStore> {
  const root = options.root ?? DEFAULT_FILE_STORE_ROOT;
  if (!isAbsolute(root)) throw new MasterRunnerError('config_invalid', 'the store directory must be an absolute path');
  const lockWaitMs = options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS;
  const dirs = await storeCall('opening the record store', () => openDirs(root));
  return new FileRecordStore(root, dirs, lockWaitMs);
}

class FileRecordStore implements RecordStore {
  readonly location: string;
  readonly #dirs: Dirs;
  readonly #lockWaitMs: number;

  constructor(location: string, dirs: Dirs, lockWaitMs: number) {
    this.location = location;
    this.#dirs = dirs;
    this.#lockWaitMs = lockWaitMs;
  }

  async get(requestId: string): Promise<RequestRecord | undefined> {
    if (!isRecordId(requestId)) return undefined;
    return storeCall('reading a record', () => this.#read(requestId));
  }

  async list(filter: RecordFilter = {}): Promise<RequestRecord[]> {
    const records = await storeCall('listing records', () => this.#readAll());
    return records.filter((r) => {
      if (filter.minionId !== undefined && r.minion_id !== filter.minionId) return false;
      if (filter.unresolved === true && !isBlocking(r)) return false;
      if (filter.states !== undefined && !filter.states.includes(r.state)) return false;
      return true;
    });
  }

  async withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T> {
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
    for (const dir of [this.#dirs.requests, this.#dirs.jids, this.#dirs.locks, this.#dirs.root]) dir.close();
  }

  async #lock(name: string): Promise<FileLock> {
    return storeCall('locking', () => this.#dirs.locks.lock(name, { wait: this.#lockWaitMs }));
  }

  #read(requestId: string): RequestRecord | undefined {
    const raw = this.#dirs.requests.readJsonIfExists(recordFileName(requestId));
    return raw === undefined ? undefined : decodeRecord(raw, requestId);
  }

  #readAll(): RequestRecord[] {
    const records: RequestRecord[] = [];
    for (const name of this.#dirs.requests.list()) {
      const id = recordIdFromFileName(name);
      if (id === undefined) continue;
      const record = this.#read(id);
      if (record !== undefined) records.push(record);
    }
    return records.sort((a, b) => (a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0));
  }

  #blockers(minionId: string): RequestRecord[] {
    return this.#readAll().filter((r) => isBlocking(r) && (r.minion_id === minionId || r.minion_id === null));
  }

  #create(minionId: string, record: ProtocolRequestRecord): CreateOutcome {
    if (record.minion_id !== minionId) throw new MasterRunnerError('internal', 'a record was created under another target');
    const existing = this.#read(record.request_id);
    if (existing !== undefined) return { created: false, reason: 'request_exists', existing };
    try {
      // W1: reserve the JID for ever (no-replace makes the check-and-take one step).
      this.#dirs.jids.writeJsonAtomic(`${record.jid}.json`, { request_id: record.request_id, minion_id: minionId }, { replace: false });
    } catch (error) {
      if (ReceiptStoreError.isInstance(error) && error.code === 'already_exists') return { created: false, reason: 'jid_taken' };
      throw error;
    }
    // W2: the record. A request id created concurrently under another target
    // loses here; its reserved JID stays burned, which is harmless.
    try {
      this.#dirs.requests.writeJsonAtomic(recordFileName(record.request_id), encodeRecord(record), { replace: false });
    } catch (error) {
      if (ReceiptStoreError.isInstance(error) && error.code === 'already_exists') {
        const winner = this.#read(record.request_id);
        if (winner !== undefined) return { created: false, reason: 'request_exists', existing: winner };
      }
      throw error;
    }
    return { created: true, record };
  }
}
