import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
// The sources: the atomic write under test is the one vitest (and Stryker) loaded.
import { openPrivateDir, ReceiptStoreError } from '../../../receipt-store/src/index.js';
import type { Position, Recorded, Sequence } from './enumerate.js';
import { FsImage } from './fs-image.js';
import { MILESTONE_DIR, toOperations } from './operations.js';
import { traceSelf } from './strace.js';

/*
 * receipt-store's own promise, the primitive every store write is made of:
 * writeJsonAtomic (replace or no-replace) and remove. Once the call has
 * returned, the file holds the new content (or is gone); before, a reader
 * finds the old content or the new one, never a torn, empty or missing file.
 */

export type StoreOutcome = string;

export interface StoreSequenceSpec {
  readonly name: string;
  readonly before?: unknown;
  readonly work: (dir: ReturnType<typeof openPrivateDir>) => void;
  /** What a reader finds once the call returned. */
  readonly after: 'old' | 'new' | 'absent';
}

const FILE = 'entry.json';
const OLD = { version: 1, note: 'the content before the write' };
const NEW = { version: 2, note: 'the content the write commits, longer than the old one' };

function read(root: string): StoreOutcome {
  let dir;
  try {
    dir = openPrivateDir(root);
  } catch (error) {
    return `error:${ReceiptStoreError.isInstance(error) ? error.code : String(error)}`;
  }
  try {
    const value = dir.readJsonIfExists(FILE);
    if (value === undefined) return 'absent';
    if (JSON.stringify(value) === JSON.stringify(OLD)) return 'old';
    if (JSON.stringify(value) === JSON.stringify(NEW)) return 'new';
    return 'other';
  } catch (error) {
    return `error:${ReceiptStoreError.isInstance(error) ? error.code : String(error)}`;
  } finally {
    dir.close();
  }
}

export const STORE_SEQUENCES: readonly StoreSequenceSpec[] = [
  { name: 'receipt-store: writeJsonAtomic replaces a file', before: OLD, work: (dir) => dir.writeJsonAtomic(FILE, NEW, { replace: true }), after: 'new' },
  { name: 'receipt-store: writeJsonAtomic creates a file (no-replace)', work: (dir) => dir.writeJsonAtomic(FILE, NEW), after: 'new' },
  { name: 'receipt-store: remove', before: OLD, work: (dir) => dir.remove(FILE), after: 'absent' },
];

export function judgeStore(spec: StoreSequenceSpec, outcome: StoreOutcome, position: Position): string[] {
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
      const { calls } = await traceSelf(async () => {
        const dir = openPrivateDir(root);
        try {
          spec.work(dir);
        } finally {
          dir.close();
        }
        statSync(join(base, MILESTONE_DIR, 'done'), { throwIfNoEntry: false });
      });
      if (read(root) !== spec.after) throw new Error(`the uninterrupted write left ${read(root)}: ${readFileSync(join(root, FILE), 'utf8')}`);
      const recording = toOperations(calls, { base, initial, umask: process.umask(), uid: process.geteuid?.() ?? 0, gid: process.getegid?.() ?? 0 });
      return { recording, context: undefined };
    },
    recover: async (dirs) => dirs.map((dir) => read(join(dir, 'store'))),
    judge: (outcome, position) => judgeStore(spec, outcome, position),
    label: (outcome) => outcome,
  };
}
