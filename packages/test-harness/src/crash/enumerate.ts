import { mkdirSync, mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FsImage } from './fs-image.js';
import type { Operation, Recording } from './operations.js';
import { crashStates, type CrashState, type EnumerationMode } from './persistence.js';

/*
 * The driver: record a sequence once, build every crash state the model
 * allows, write each distinct one as a real directory tree, run the real
 * recovery on it, and judge what recovery said against the sequence's
 * allowed outcomes at that point of the sequence. A sequence is a few lines
 * of data (see minion-sequences.ts, master-sequences.ts).
 */

export interface Recorded<C> {
  readonly recording: Recording;
  readonly context: C;
}

/** Where a crash state lies in its sequence, as a judge sees it. */
export type Position = Pick<CrashState, 'prefix' | 'after' | 'before' | 'executions'>;

export interface Sequence<C, O> {
  readonly name: string;
  /** Runs the setup and the traced workload in `workdir` (a private scratch directory). */
  record(workdir: string): Promise<Recorded<C>>;
  /** Runs the real recovery on each materialized state (a directory standing for the recorded base). */
  recover(dirs: readonly string[], context: C): Promise<O[]>;
  /** The problems with `outcome` at `position` (empty: an allowed outcome). */
  judge(outcome: O, position: Position, context: C): string[];
  /** A short label of an outcome, for the report's histogram. */
  label(outcome: O, context: C): string;
}

interface Violation {
  readonly state: string;
  readonly problems: readonly string[];
}

export interface SequenceReport {
  readonly sequence: string;
  readonly mode: EnumerationMode;
  readonly operations: number;
  /** Crash states the model produced (before removing duplicates). */
  readonly generated: number;
  /** Distinct directory trees recovery ran on. */
  readonly trees: number;
  /** Distinct (tree, position in the sequence) pairs judged: the crash states explored. */
  readonly states: number;
  readonly outcomes: Readonly<Record<string, number>>;
  readonly violations: readonly Violation[];
  readonly ms: number;
}

export interface EnumerateOptions {
  readonly mode: EnumerationMode;
  /** Recovery runs on at most this many trees (smoke): picked evenly over the sequence. */
  readonly maxTrees?: number;
}

function describeOp(op: Operation, index: number, names: Map<number, string>): string {
  const at = (dir: number, name: string): string => `${names.get(dir) ?? `#${dir}`}/${name}`;
  switch (op.kind) {
    case 'creat':
    case 'mkdir':
      return `${index}:${op.kind} ${at(op.dir, op.name)}`;
    case 'rename':
      return `${index}:rename ${at(op.fromDir, op.fromName)} -> ${at(op.toDir, op.toName)}`;
    case 'unlink':
      return `${index}:unlink ${at(op.dir, op.name)}`;
    case 'write':
    case 'truncate':
    case 'chmod':
    case 'fsync':
      return `${index}:${op.kind} ${names.get(op.inode) ?? `#${op.inode}`}`;
    case 'milestone':
      return `${index}:milestone ${op.name}`;
    case 'effect':
      return `${index}:effect`;
  }
}

/** Inode → a path it had at some point (for readable reports). */
function inodeNames(recording: Recording): Map<number, string> {
  const names = new Map<number, string>([[0, '.']]);
  for (const image of [recording.initial, recording.final]) for (const [path, id] of image.walk()) if (!names.has(id)) names.set(id, path);
  for (const op of recording.operations) {
    if (op.kind === 'creat' || op.kind === 'mkdir') if (!names.has(op.inode)) names.set(op.inode, `${names.get(op.dir) ?? '?'}/${op.name}`);
  }
  return names;
}

function describeState(state: CrashState, names: Map<number, string>, ops: readonly Operation[]): string {
  const list = (indices: readonly number[]) => indices.map((i) => describeOp(ops[i] as Operation, i, names)).join('; ');
  return [
    `crash after ${state.prefix} operations (after ${state.after}, before ${state.before}, ${state.executions} execution(s))`,
    state.lost.length > 0 ? `lost: ${list(state.lost)}` : 'nothing lost',
    state.kept.length > 0 ? `un-persisted but kept: ${list(state.kept)}` : '',
    state.torn === undefined ? '' : `torn: ${list([state.torn])}`,
  ]
    .filter((part) => part !== '')
    .join(' | ');
}

/** Picks `count` items spread evenly over `items`, always the first and the last. */
function spread<T>(items: readonly T[], count: number): T[] {
  if (items.length <= count) return [...items];
  const picked: T[] = [];
  for (let i = 0; i < count; i++) picked.push(items[Math.round((i * (items.length - 1)) / (count - 1))] as T);
  return picked;
}

export async function enumerateSequence<C, O>(sequence: Sequence<C, O>, options: EnumerateOptions): Promise<SequenceReport> {
  const started = Date.now();
  const workdir = mkdtempSync(join(tmpdir(), `oduflow-crash-${sequence.name}-`));
  chmodSync(workdir, 0o700);
  try {
    const { recording, context } = await sequence.record(join(workdir, 'record'));
    const names = inodeNames(recording);
    // One entry per distinct tree; every position that produced it is judged on the one recovery.
    const trees = new Map<string, { image: FsImage; positions: Map<string, { position: Position; description: string }> }>();
    let generated = 0;
    for (const state of crashStates(recording, { mode: options.mode })) {
      generated += 1;
      const fingerprint = state.image.fingerprint();
      let tree = trees.get(fingerprint);
      if (tree === undefined) {
        tree = { image: state.image, positions: new Map() };
        trees.set(fingerprint, tree);
      }
      const key = `${state.after}|${state.before}|${state.executions}`;
      if (!tree.positions.has(key)) {
        const { prefix, after, before, executions } = state;
        tree.positions.set(key, { position: { prefix, after, before, executions }, description: describeState(state, names, recording.operations) });
      }
    }
    const chosen = options.maxTrees === undefined ? [...trees.values()] : spread([...trees.values()], options.maxTrees);
    const statesRoot = join(workdir, 'states');
    mkdirSync(statesRoot, { mode: 0o700 });
    const dirs = chosen.map((tree, i) => {
      const dir = join(statesRoot, String(i));
      mkdirSync(dir);
      const root = tree.image.inode(0);
      chmodSync(dir, root.mode);
      tree.image.materialize(dir);
      return dir;
    });
    const outcomes = await sequence.recover(dirs, context);
    const histogram: Record<string, number> = {};
    const violations: Violation[] = [];
    let judged = 0;
    chosen.forEach((tree, i) => {
      const outcome = outcomes[i] as O;
      for (const { position, description } of tree.positions.values()) {
        judged += 1;
        const label = sequence.label(outcome, context);
        histogram[label] = (histogram[label] ?? 0) + 1;
        const problems = sequence.judge(outcome, position, context);
        if (problems.length > 0) violations.push({ state: description, problems });
      }
    });
    return {
      sequence: sequence.name,
      mode: options.mode,
      operations: recording.operations.length,
      generated,
      trees: chosen.length,
      states: judged,
      outcomes: histogram,
      violations,
      ms: Date.now() - started,
    };
  } finally {
    rmSync(workdir, { recursive: true, force: true });
  }
}
