import { FsImage } from './fs-image.js';
import { allocate, applyOperation, type Operation, type Recording } from './operations.js';

/*
 * The conservative persistence model (ALICE's "abstract persistence model",
 * CrashMonkey's "un-persisted set"), applied to every prefix of a recorded
 * operation sequence:
 *
 *   - a crash may come after any number of operations (every prefix);
 *   - a write, truncate or chmod of an inode is durable only once that inode
 *     was fsynced after it; until then it may be lost, and a write may be
 *     torn (only its first half reaches the disk);
 *   - a directory entry (create, mkdir, rename, unlink) is durable only once
 *     its directory (both directories of a rename) was fsynced after it;
 *     until then it may be lost;
 *   - the un-persisted operations may reach the disk in any order. Operations
 *     on different names and inodes commute, and a journal keeps the order of
 *     those on the same name, so every reachable state is "the durable
 *     operations plus any subset of the un-persisted ones, in program order".
 *
 * An inode created in the prefix always exists (allocated); only its name
 * may be lost. What the workload did outside the modelled tree (a state that
 * really ran: an effect) is never undone by a crash.
 */

export type EnumerationMode = 'full' | 'smoke';

export interface CrashState {
  /** Operations [0, prefix) were issued before the crash. */
  readonly prefix: number;
  /** Un-persisted operations (indices) that did reach the disk. */
  readonly kept: readonly number[];
  /** Un-persisted operations (indices) that were lost. */
  readonly lost: readonly number[];
  /** A write (index) that reached the disk only in part. */
  readonly torn?: number;
  readonly image: FsImage;
  /** The last milestone or effect before the crash ('start' when none). */
  readonly after: string;
  /** The first milestone or effect the workload had not reached ('end' when none). */
  readonly before: string;
  /** Effects (real executions) issued before the crash. */
  readonly executions: number;
}

/** The index of the fsync that makes operation `i` durable, or Infinity. */
function durableAt(ops: readonly Operation[], i: number): number {
  const op = ops[i] as Operation;
  const syncedAfter = (inode: number): number => {
    for (let j = i + 1; j < ops.length; j++) {
      const later = ops[j] as Operation;
      if (later.kind === 'fsync' && later.inode === inode) return j;
    }
    return Number.POSITIVE_INFINITY;
  };
  switch (op.kind) {
    case 'write':
    case 'truncate':
    case 'chmod':
      return syncedAfter(op.inode);
    case 'creat':
    case 'mkdir':
    case 'unlink':
      return syncedAfter(op.dir);
    case 'rename':
      return Math.max(syncedAfter(op.fromDir), syncedAfter(op.toDir));
    default:
      return -1; // fsyncs and marks change nothing on disk
  }
}

function isStateOp(op: Operation): boolean {
  return op.kind !== 'fsync' && op.kind !== 'milestone' && op.kind !== 'effect';
}

/** Subsets of `items` to keep: all of them (full), or none, all, each alone and all but each (smoke). */
function subsets(items: readonly number[], mode: EnumerationMode, maxFull: number): number[][] {
  if (mode === 'full' && items.length <= maxFull) {
    const all: number[][] = [];
    for (let mask = 0; mask < 2 ** items.length; mask++) all.push(items.filter((_, bit) => (mask & (2 ** bit)) !== 0));
    return all;
  }
  const picked = new Map<string, number[]>();
  const add = (subset: number[]): void => void picked.set(subset.join(','), subset);
  add([]);
  add([...items]);
  for (const item of items) {
    add([item]);
    add(items.filter((other) => other !== item));
  }
  return [...picked.values()];
}

export interface CrashStateOptions {
  readonly mode: EnumerationMode;
  /** Largest un-persisted set whose every subset is explored in full mode (beyond: the smoke subsets). */
  readonly maxFullSubsets?: number;
}

/** Every crash state of the recording under the model above (see the header), prefix by prefix. */
export function* crashStates(recording: Recording, options: CrashStateOptions): Generator<CrashState> {
  const ops = recording.operations;
  const durable = ops.map((_, i) => durableAt(ops, i));
  const maxFull = options.maxFullSubsets ?? 16;
  const marks = ops.map((op, i) => (op.kind === 'milestone' || op.kind === 'effect' ? { i, name: op.kind === 'effect' ? 'effect' : op.name } : undefined)).filter((m) => m !== undefined);
  for (let prefix = 0; prefix <= ops.length; prefix++) {
    const unpersisted: number[] = [];
    for (let i = 0; i < prefix; i++) if (isStateOp(ops[i] as Operation) && (durable[i] ?? Infinity) >= prefix) unpersisted.push(i);
    const after = [...marks].reverse().find((m) => m.i < prefix)?.name ?? 'start';
    const before = marks.find((m) => m.i >= prefix)?.name ?? 'end';
    const executions = ops.slice(0, prefix).filter((op) => op.kind === 'effect').length;
    for (const kept of subsets(unpersisted, options.mode, maxFull)) {
      const keptSet = new Set(kept);
      const writes = kept.filter((i) => { const op = ops[i]; return op?.kind === 'write' && op.data.length > 1; });
      const tearable = options.mode === 'full' ? writes : writes.slice(-1);
      for (const torn of [undefined, ...tearable]) {
        const image = recording.initial.clone();
        for (let i = 0; i < prefix; i++) {
          const op = ops[i] as Operation;
          if ((op.kind === 'creat' || op.kind === 'mkdir') && !image.inodes.has(op.inode)) allocate(image, op);
        }
        for (let i = 0; i < prefix; i++) {
          const op = ops[i] as Operation;
          if (!isStateOp(op)) continue;
          if ((durable[i] ?? Infinity) < prefix || keptSet.has(i)) {
            const half = i === torn && op.kind === 'write' ? Math.floor(op.data.length / 2) : undefined;
            applyOperation(image, op, half);
          }
        }
        yield {
          prefix,
          kept,
          lost: unpersisted.filter((i) => !keptSet.has(i)),
          ...(torn === undefined ? {} : { torn }),
          image,
          after,
          before,
          executions,
        };
      }
    }
  }
}
