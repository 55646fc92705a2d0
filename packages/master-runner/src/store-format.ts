import { isMinionId } from '@oduflow/protocol';
import { ReceiptStoreError, openPrivateDir, type PrivateDir } from '@oduflow/receipt-store';
import { isAbsolute } from 'node:path';
import { MasterRunnerError } from './errors.js';
import { recordFileName, recordIdFromFileName } from './record-id.js';

/*
 * The on-disk format of the embedded file store, in one place (the store and
 * migrate-store both use it):
 *
 *   <root>/                                   0700, owned by the runner's user, never a symlink
 *     format.json                             {"format":"oduflow-master-file-store","version":2}: written once the indexes are complete
 *     requests/<request_id>.json              the record (protocol 1, or a legacy record kept verbatim)
 *     jids/<jid>.json                         JID index {request_id, minion_id}; created no-replace, never removed
 *     targets/<minion_id>/<request_id>.json   target index (history): every record of the target; never removed
 *     unbound/<request_id>.json               records that name no target (legacy) or cannot be decoded; never removed
 *     unresolved/<minion_id>/<request_id>.json  unresolved index: a superset of the target's blocking records
 *     unresolved/_unbound/<request_id>.json   blocking records that name no target, and undecodable ones: every target reads them
 *     keys/<key_hash>.json                    an Idempotency-Key (hashed, scoped): {key_hash, fingerprint, request_id, tenant, actor,
 *                                             state "claimed"|"bound", lease_until, bound_at}; removed by expireKeys
 *     outbox/<request_id>.json                an admitted request not yet handed to Salt: {request_id, minion_id, jid, state_data_json,
 *                                             enqueued_at, attempts, due_at, claimed_until}; removed once published (the only
 *                                             place state data is ever stored, and only until then)
 *     locks/store.lock                        shared by every unit, exclusive while migrate-store runs
 *     locks/target-<minion>.lock, locks/request-<id>.lock, locks/key-<key_hash>.lock, locks/outbox.lock
 *
 * keys/ and outbox/ came after version 2 and stay version 2: a store
 * without them has no keys and no outbox, which is what the empty
 * directories an opener creates say (mkdir, O(1)), and a runner of the
 * previous release never reads them (its units keep every record
 * invariant; the relay never publishes a record that is not prepared).
 * A marker bump would have forced a migrate-store on every upgrade for
 * nothing.
 *
 * Version 2 is the first with a marker. Stores without one are version 0
 * (requests/ and jids/ only) or 1 (plus targets/ and unbound/, re-indexed on
 * every open); `oduflow-master migrate-store` brings both to version 2.
 *
 * No directory is swept for stale temporary files when a store is opened:
 * requests/, jids/ and locks/ hold one entry per request ever made, and a
 * sweep lists the whole directory. migrate-store sweeps them all.
 */

export const DEFAULT_FILE_STORE_ROOT = '/var/lib/oduflow/master';
export const DEFAULT_LOCK_WAIT_MS = 30_000;
export const FILE_STORE_FORMAT_VERSION = 2;
const FORMAT_FILE = 'format.json';
const FORMAT_NAME = 'oduflow-master-file-store';

export const STORE_LOCK = 'store.lock';
/** Serializes the outbox's read-modify-write units (claim, defer, remove) across relays. */
export const OUTBOX_LOCK = 'outbox.lock';
/** The unresolved-index bucket read by every target's blocking check; never a minion id. */
export const UNBOUND_BUCKET = '_unbound';

const SUBDIRS = ['requests', 'jids', 'locks', 'targets', 'unbound', 'unresolved', 'keys', 'outbox'] as const;
type SubdirName = (typeof SUBDIRS)[number];
export type StoreDirs = Readonly<Record<'root' | SubdirName, PrivateDir>>;

export interface OpenStoreDirsOptions {
  /** Create the store directory when it is missing; without, a directory lacking requests/ is no store. */
  readonly create: boolean;
  /** Sweep every directory for temporary files of dead writers (migrate-store only). */
  readonly sweep: boolean;
}

export function isNotFound(error: unknown): boolean {
  return ReceiptStoreError.isInstance(error) && error.code === 'not_found';
}

export function isAlreadyExists(error: unknown): boolean {
  return ReceiptStoreError.isInstance(error) && error.code === 'already_exists';
}

/** A record that cannot be read as a record (not JSON, damaged, not a private regular file). */
export function isUnreadableRecord(error: unknown): boolean {
  if (MasterRunnerError.isInstance(error)) return error.code === 'store_corrupt';
  return ReceiptStoreError.isInstance(error) && (error.code === 'malformed_json' || error.code === 'unsafe_path');
}

function noStore(root: string): MasterRunnerError {
  return new MasterRunnerError('not_found', `there is no record store at ${root}`, { detail: 'no_store' });
}

export function needsMigration(root: string): MasterRunnerError {
  return new MasterRunnerError(
    'store_format',
    `the record store at ${root} was written by an older release and has no format marker: stop every oduflow-master using it, run "oduflow-master migrate-store --store ${root}" once, then start them again`,
    { detail: 'needs_migration' },
  );
}

export function unknownFormat(root: string): MasterRunnerError {
  return new MasterRunnerError(
    'store_format',
    `the record store at ${root} has a format marker this release does not know (a newer release wrote it?); it was left untouched`,
    { detail: 'unknown_format' },
  );
}

/** The store directory from the options: absolute, or config_invalid. */
export function storeRoot(root: string | undefined): string {
  const path = root ?? DEFAULT_FILE_STORE_ROOT;
  if (!isAbsolute(path)) throw new MasterRunnerError('config_invalid', 'the store directory must be an absolute path');
  return path;
}

export function openStoreDirs(root: string, options: OpenStoreDirsOptions): StoreDirs {
  const removeStaleTemps = options.sweep;
  let dir: PrivateDir;
  try {
    dir = openPrivateDir(root, { create: options.create, removeStaleTemps });
  } catch (error) {
    if (!options.create && isNotFound(error)) throw noStore(root);
    throw error;
  }
  // Every handle opened so far is closed if a later one fails (no fd leak on a refused store).
  const opened: PrivateDir[] = [dir];
  try {
    if (!options.create) {
      // A directory without requests/ holds no store yet: leave it untouched.
      try {
        dir.subdir('requests', { removeStaleTemps: false }).close();
      } catch (error) {
        if (isNotFound(error)) throw noStore(root);
        throw error;
      }
    }
    const open = (name: SubdirName): PrivateDir => {
      const sub = dir.subdir(name, { create: true, removeStaleTemps });
      opened.push(sub);
      return sub;
    };
    const subdirs = Object.fromEntries(SUBDIRS.map((name) => [name, open(name)])) as Record<SubdirName, PrivateDir>;
    return { root: dir, ...subdirs };
  } catch (error) {
    for (const handle of opened.reverse()) handle.close();
    throw error;
  }
}

export function closeStoreDirs(dirs: StoreDirs): void {
  for (const name of [...SUBDIRS, 'root'] as const) dirs[name].close();
}

export type StoreFormat = 'current' | 'absent' | 'unknown';

export function readFormat(root: PrivateDir): StoreFormat {
  let marker: unknown;
  try {
    marker = root.readJsonIfExists(FORMAT_FILE);
  } catch (error) {
    if (ReceiptStoreError.isInstance(error) && error.code === 'malformed_json') return 'unknown';
    throw error;
  }
  if (marker === undefined) return 'absent';
  const fields = typeof marker === 'object' && marker !== null ? (marker as Record<string, unknown>) : {};
  return fields['format'] === FORMAT_NAME && fields['version'] === FILE_STORE_FORMAT_VERSION ? 'current' : 'unknown';
}

/** Writes the marker; one written meanwhile by another opener of an empty store is as good. */
export function writeFormat(root: PrivateDir): void {
  try {
    root.writeJsonAtomic(FORMAT_FILE, { format: FORMAT_NAME, version: FILE_STORE_FORMAT_VERSION }, { replace: false });
  } catch (error) {
    if (!isAlreadyExists(error)) throw error;
  }
}

export function removeFormat(root: PrivateDir): void {
  try {
    root.remove(FORMAT_FILE);
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}

/** Whether a store holds nothing to index: no record and no reserved JID. */
export function isEmptyStore(dirs: StoreDirs): boolean {
  return dirs.requests.list().length === 0 && dirs.jids.list().length === 0;
}

/** Record ids named by the entries of `dir` (records, or index entries: same names). */
export function idsIn(dir: PrivateDir): string[] {
  const ids: string[] = [];
  for (const name of dir.list()) {
    const id = recordIdFromFileName(name);
    if (id !== undefined) ids.push(id);
  }
  return ids;
}

/** A name under unresolved/ that this store writes. */
export function isBucket(name: string): boolean {
  return name === UNBOUND_BUCKET || isMinionId(name);
}

/** The unresolved-index bucket of a record: its target, or the one every target reads. */
export function bucketOf(minionId: string | null): string {
  return minionId ?? UNBOUND_BUCKET;
}

/**
 * Runs `work` on the sub-directory `name` of `parent` (never swept), or
 * returns `missing` when it does not exist and `create` is false.
 */
export function inSubdir<T>(parent: PrivateDir, name: string, create: boolean, work: (dir: PrivateDir) => T, missing: T): T {
  let dir: PrivateDir;
  try {
    dir = parent.subdir(name, { create, removeStaleTemps: false });
  } catch (error) {
    if (!create && isNotFound(error)) return missing;
    throw error;
  }
  try {
    return work(dir);
  } finally {
    dir.close();
  }
}

/** Whether the index entry of record `id` exists in `dir`. */
export function hasEntry(dir: PrivateDir, id: string): boolean {
  return dir.readJsonIfExists(recordFileName(id)) !== undefined;
}

/**
 * Writes the index entry of record `id` (no-replace). An existing entry is
 * kept: a record's identity never changes, so neither does its entry.
 * Returns whether it wrote one.
 */
export function writeEntry(dir: PrivateDir, id: string, minionId: string | null): boolean {
  try {
    dir.writeJsonAtomic(recordFileName(id), { request_id: id, minion_id: minionId }, { replace: false });
    return true;
  } catch (error) {
    if (isAlreadyExists(error)) return false;
    throw error;
  }
}

/** Removes the index entry of record `id`; one already gone is fine. */
export function removeEntry(dir: PrivateDir, id: string): void {
  try {
    dir.remove(recordFileName(id));
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}
