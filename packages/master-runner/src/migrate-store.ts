import { isBlocking, isMinionId, type RequestRecord } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import type { StoreCrashPoint } from './crash-points.js';
import { decodeRecord } from './record-codec.js';
import { recordFileName } from './record-id.js';
import { storeCall } from './store-errors.js';
import {
  DEFAULT_LOCK_WAIT_MS,
  STORE_LOCK,
  bucketOf,
  closeStoreDirs,
  idsIn,
  inSubdir,
  isBucket,
  isUnreadableRecord,
  openStoreDirs,
  readFormat,
  removeEntry,
  removeFormat,
  storeRoot,
  unknownFormat,
  writeEntry,
  writeFormat,
  type StoreDirs,
} from './store-format.js';

/*
 * migrate-store: the one-shot step that brings a file store of an older
 * layout (version 0: records and JIDs only; version 1: plus targets/ and
 * unbound/) to the current format, so that opening it reads no record.
 * Run again on a current store, it re-checks every record and repairs the
 * indexes: the step to take after restoring records from a backup or after
 * crashes have left stale unresolved entries.
 *
 * Holding locks/store.lock exclusively (no unit of this release runs
 * meanwhile, and openers wait), it:
 *   1. removes the format marker, if any: until step 5, a crash leaves a store
 *      every opener refuses, so nothing ever dispatches on a half-built index;
 *   2. reads every record and writes the entries it lacks (no-replace):
 *      targets/<minion>/ or unbound/, and unresolved/<bucket>/ when it blocks
 *      or cannot be decoded (fail closed: it then blocks every target);  → S5 after each
 *   3. removes unresolved entries that point to no record, to a record that
 *      no longer blocks, or to one indexed in another bucket;             → S6
 *   4. (every directory was swept for dead writers' temporary files when opened)
 *   5. writes the format marker.
 * Every step is idempotent, so a rerun after a crash anywhere finishes the
 * job. Writers of a release before this one know nothing of the store lock:
 * stop them before migrating, and do not start them again.
 */

export interface MigrateFileStoreOptions {
  /** Absolute path of the store directory (default /var/lib/oduflow/master). It must exist. */
  readonly root?: string;
  /** How long to wait for units in progress to finish before giving up (store_busy). */
  readonly lockWaitMs?: number;
  /** Test seam at S5 and S6 (see crash-points.ts). Default: nothing. */
  readonly crashAt?: (point: StoreCrashPoint) => void;
}

export interface MigrateFileStoreReport {
  readonly location: string;
  /** The store already carried the current format marker: this run re-checked and repaired it. */
  readonly wasCurrent: boolean;
  /** Records read. */
  readonly records: number;
  /** Records that cannot be decoded: indexed so that they stop every dispatch (store_corrupt) until repaired. */
  readonly undecodable: number;
  /** Records that block their target (or every target), after the migration. */
  readonly unresolved: number;
  /** Target and unbound entries written (records that had none). */
  readonly historyEntriesWritten: number;
  /** Unresolved entries written (blocking records that had none). */
  readonly unresolvedEntriesWritten: number;
  /** Unresolved entries removed (pointing to nothing, to a settled record, or to another bucket). */
  readonly staleEntriesRemoved: number;
}

const noCrash = (): void => undefined;

interface Counts {
  records: number;
  undecodable: number;
  unresolved: number;
  historyEntriesWritten: number;
  unresolvedEntriesWritten: number;
  staleEntriesRemoved: number;
}

/** Where a record belongs in the indexes; an undecodable one blocks every target. */
interface Placement {
  readonly minionId: string | null;
  readonly blocking: boolean;
  readonly decodable: boolean;
}

function placementOf(requests: PrivateDir, id: string): Placement | undefined {
  let record: RequestRecord;
  try {
    const raw = requests.readJsonIfExists(recordFileName(id));
    if (raw === undefined) return undefined;
    record = decodeRecord(raw, id);
  } catch (error) {
    if (isUnreadableRecord(error)) return { minionId: null, blocking: true, decodable: false };
    throw error;
  }
  return { minionId: record.minion_id, blocking: isBlocking(record), decodable: true };
}

/** The entries under each index directory of `parent` (sweeping each for dead writers' temporary files). */
function entriesByDir(parent: PrivateDir, isIndexDir: (name: string) => boolean): Map<string, Set<string>> {
  const entries = new Map<string, Set<string>>();
  for (const name of parent.list().filter(isIndexDir)) {
    const dir = parent.subdir(name);
    try {
      entries.set(name, new Set(idsIn(dir)));
    } finally {
      dir.close();
    }
  }
  return entries;
}

class Migration {
  readonly #dirs: StoreDirs;
  readonly #crashAt: (point: StoreCrashPoint) => void;
  readonly #history: Map<string, Set<string>>;
  readonly #unbound: Set<string>;
  readonly #unresolved: Map<string, Set<string>>;
  /** What unresolved/ must hold once the records are read: bucket → ids. */
  readonly #expected = new Map<string, Set<string>>();
  readonly counts: Counts = { records: 0, undecodable: 0, unresolved: 0, historyEntriesWritten: 0, unresolvedEntriesWritten: 0, staleEntriesRemoved: 0 };

  constructor(dirs: StoreDirs, crashAt: (point: StoreCrashPoint) => void) {
    this.#dirs = dirs;
    this.#crashAt = crashAt;
    this.#history = entriesByDir(dirs.targets, isMinionId);
    this.#unbound = new Set(idsIn(dirs.unbound));
    this.#unresolved = entriesByDir(dirs.unresolved, isBucket);
  }

  indexRecords(): void {
    for (const id of idsIn(this.#dirs.requests)) {
      const placement = placementOf(this.#dirs.requests, id);
      if (placement === undefined) continue; // gone since the listing: nothing to index
      this.counts.records += 1;
      if (!placement.decodable) this.counts.undecodable += 1;
      this.#indexHistory(id, placement.minionId);
      if (placement.blocking) this.#indexUnresolved(id, placement);
      this.#crashAt('S5');
    }
  }

  removeStaleEntries(): void {
    for (const [bucket, ids] of this.#unresolved) {
      const expected = this.#expected.get(bucket);
      for (const id of ids) {
        if (expected?.has(id) === true) continue;
        inSubdir(this.#dirs.unresolved, bucket, false, (dir) => removeEntry(dir, id), undefined);
        this.counts.staleEntriesRemoved += 1;
      }
    }
    this.#crashAt('S6');
  }

  #indexHistory(id: string, minionId: string | null): void {
    if (minionId === null) {
      if (!this.#unbound.has(id) && writeEntry(this.#dirs.unbound, id, null)) this.counts.historyEntriesWritten += 1;
      return;
    }
    if (this.#history.get(minionId)?.has(id) === true) return;
    if (inSubdir(this.#dirs.targets, minionId, true, (dir) => writeEntry(dir, id, minionId), false)) this.counts.historyEntriesWritten += 1;
  }

  #indexUnresolved(id: string, placement: Placement): void {
    this.counts.unresolved += 1;
    const bucket = bucketOf(placement.minionId); // an undecodable record names no target: _unbound
    const expected = this.#expected.get(bucket) ?? new Set<string>();
    expected.add(id);
    this.#expected.set(bucket, expected);
    if (this.#unresolved.get(bucket)?.has(id) === true) return;
    if (inSubdir(this.#dirs.unresolved, bucket, true, (dir) => writeEntry(dir, id, placement.minionId), false)) {
      this.counts.unresolvedEntriesWritten += 1;
    }
  }
}

/**
 * Brings the file store at `options.root` to the current format, or
 * re-checks and repairs one that is current. Idempotent and crash-safe; see
 * the comment above. Refuses a missing store (not_found, no_store) and one
 * with an unknown marker (store_format, unknown_format).
 */
export async function migrateFileRecordStore(options: MigrateFileStoreOptions = {}): Promise<MigrateFileStoreReport> {
  const root = storeRoot(options.root);
  const crashAt = options.crashAt ?? noCrash;
  const dirs = await storeCall('opening the record store', () => openStoreDirs(root, { create: false, sweep: true }));
  try {
    const lock = await storeCall('locking the store', () => dirs.locks.lock(STORE_LOCK, { wait: options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS }));
    try {
      return await storeCall('migrating the record store', () => {
        const format = readFormat(dirs.root);
        if (format === 'unknown') throw unknownFormat(root);
        removeFormat(dirs.root);
        const migration = new Migration(dirs, crashAt);
        migration.indexRecords();
        migration.removeStaleEntries();
        writeFormat(dirs.root);
        return { location: root, wasCurrent: format === 'current', ...migration.counts };
      });
    } finally {
      lock.release();
    }
  } finally {
    closeStoreDirs(dirs);
  }
}
