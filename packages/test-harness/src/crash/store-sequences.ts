import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
// The sources: the atomic write under test is the one vitest (and Stryker) loaded.
import { openPrivateDir, ReceiptStoreError, writeFileAtomic, type PrivateDir } from '../../../receipt-store/src/index.js';
import type { Position, Recorded, Sequence } from './enumerate.js';
import { FsImage } from './fs-image.js';
import { MILESTONE_DIR, toOperations } from './operations.js';
import { traceSelf } from './strace.js';
import { currentUmask } from './umask.js';

/*
 * receipt-store's own promise, the primitive every store write is made of:
 * writeJsonAtomic (replace or no-replace, also into a private directory it
 * just created), remove, and writeFileAtomic (also creating its parents).
 * Once the call has returned, the file holds the new content (or is gone);
 * before, a reader finds the old content or the new one, never a torn, empty
 * or missing file.
 */

export type StoreOutcome = string;

export interface StoreSequenceSpec {
  readonly name: string;
  readonly before?: unknown;
  /** The workload, given the store directory's path. */
  readonly work: (root: string) => void;
  /** Where the file lives below the store directory (default: entry.json). */
  readonly path?: readonly string[];
  /** How a reader opens it: through openPrivateDir (the stores) or as a plain file (writeFileAtomic's callers). */
  readonly reader?: 'private' | 'plain';
  /** What a reader finds once the call returned. */
  readonly after: 'old' | 'new' | 'absent';
}

const FILE = 'entry.json';
const OLD = { version: 1, note: 'the content before the write' };
const NEW = { version: 2, note: 'the content the write commits, longer than the old one' };

function versionOf(value: unknown): StoreOutcome {
  if (JSON.stringify(value) === JSON.stringify(OLD)) return 'old';
  if (JSON.stringify(value) === JSON.stringify(NEW)) return 'new';
  return 'other';
}

function readPlain(path: string): StoreOutcome {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : `error:${(error as NodeJS.ErrnoException).code}`;
  }
  try {
    return versionOf(JSON.parse(text));
  } catch {
    return 'torn';
  }
}

function read(root: string, spec: StoreSequenceSpec): StoreOutcome {
  const path = spec.path ?? [FILE];
  if (spec.reader === 'plain') return readPlain(join(root, ...path));
  let dir: PrivateDir;
  try {
    dir = openPrivateDir(root);
    for (const name of path.slice(0, -1)) {
      const sub: PrivateDir = dir.subdir(name);
      dir.close();
      dir = sub;
    }
  } catch (error) {
    if (ReceiptStoreError.isInstance(error) && error.code === 'not_found') return 'absent';
    return `error:${ReceiptStoreError.isInstance(error) ? error.code : String(error)}`;
  }
  try {
    const value = dir.readJsonIfExists(path.at(-1) as string);
    if (value === undefined) return 'absent';
    return versionOf(value);
  } catch (error) {
    return `error:${ReceiptStoreError.isInstance(error) ? error.code : String(error)}`;
  } finally {
    dir.close();
  }
}

const inPrivateDir = (work: (dir: ReturnType<typeof openPrivateDir>) => void) => (root: string) => {
  const dir = openPrivateDir(root);
  try {
    work(dir);
  } finally {
    dir.close();
  }
};

export const STORE_SEQUENCES: readonly StoreSequenceSpec[] = [
  { name: 'receipt-store: writeJsonAtomic replaces a file', before: OLD, work: inPrivateDir((dir) => dir.writeJsonAtomic(FILE, NEW, { replace: true })), after: 'new' },
  { name: 'receipt-store: writeJsonAtomic creates a file (no-replace)', work: inPrivateDir((dir) => dir.writeJsonAtomic(FILE, NEW)), after: 'new' },
  { name: 'receipt-store: remove', before: OLD, work: inPrivateDir((dir) => dir.remove(FILE)), after: 'absent' },
  {
    name: 'receipt-store: a new private subdirectory and a file in it',
    work: inPrivateDir((dir) => {
      const sub = dir.subdir('sub', { create: true });
      sub.writeJsonAtomic(FILE, NEW);
      sub.close();
    }),
    path: ['sub', FILE],
    after: 'new',
  },
  {
    name: 'receipt-store: writeFileAtomic replaces a file',
    before: OLD,
    work: (root) => writeFileAtomic(join(root, FILE), JSON.stringify(NEW)),
    reader: 'plain',
    after: 'new',
  },
  {
    name: 'receipt-store: writeFileAtomic creates its parent directories',
    work: (root) => writeFileAtomic(join(root, 'a', 'b', FILE), JSON.stringify(NEW), { dirMode: 0o700 }),
    path: ['a', 'b', FILE],
    reader: 'plain',
    after: 'new',
  },
];

function judgeStore(spec: StoreSequenceSpec, outcome: StoreOutcome, position: Position): string[] {
  const old = spec.before === undefined ? 'absent' : 'old';
  const allowed = position.after === 'done' ? [spec.after] : [old, spec.after];
  return allowed.includes(outcome) ? [] : [`a reader found ${outcome}; allowed here: ${allowed.join(', ')}`];
}

export function storeSequence(spec: StoreSequenceSpec): Sequence<undefined, StoreOutcome> {
  return {
    name: spec.name,
    async record(workdir: string): Promise<Recorded<undefined>> {
      const base = join(workdir, 'base');
      mkdirSync(base, { recursive: true, mode: 0o700 });
      const root = join(base, 'store');
      const setup = openPrivateDir(root, { create: true });
      if (spec.before !== undefined) setup.writeJsonAtomic(FILE, spec.before);
      setup.close();
      const initial = FsImage.snapshot(base, new Set([MILESTONE_DIR]));
      const { calls } = await traceSelf(() => {
        spec.work(root);
        statSync(join(base, MILESTONE_DIR, 'done'), { throwIfNoEntry: false });
        return Promise.resolve();
      });
      if (read(root, spec) !== spec.after) throw new Error(`the uninterrupted write left ${read(root, spec)}`);
      const recording = toOperations(calls, { base, initial, umask: currentUmask(), uid: process.geteuid?.() ?? 0, gid: process.getegid?.() ?? 0 });
      return { recording, context: undefined };
    },
    recover: (dirs) => Promise.resolve(dirs.map((dir) => read(join(dir, 'store'), spec))),
    judge: (outcome, position) => judgeStore(spec, outcome, position),
    label: (outcome) => outcome,
  };
}
