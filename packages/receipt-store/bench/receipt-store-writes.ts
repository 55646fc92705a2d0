import { closeSync, constants, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { bareAtomicWrite, interleaved, rowOf, timeMs, type BenchIdentity } from '../../test-harness/src/bench/measure.js';
import type { BenchMode, BenchResult, BenchRow, Target } from '../../test-harness/src/bench/result.js';
// The built package (a self-reference): its native addon is found relative to dist/, which a bundle of src/ would not be.
import { openPrivateDir, type PrivateDir } from '@oduflow/receipt-store';

/*
 * The durable file primitives every store and the job envelope are built on,
 * each beside its floor in the same run (this replaces the absolute ceilings
 * of bench/targets.json, which were ~10× one measurement and caught only a
 * gross regression):
 *
 *   writeJsonAtomic (new name, replace)   vs a bare write + fsync + rename + directory fsync
 *                                          of the same bytes in the same directory
 *   readJson                              vs readFileSync + JSON.parse of the same file
 *   tryLockSync + release                 vs open + close of the same lock file (the calls
 *                                          around the flock itself)
 *   lock, held, released on the next tick vs a 1 ms timer (the waiter's first backoff step:
 *                                          the hand-over cannot be faster than it)
 *   openPrivateDir, 3 levels deep         vs one open(O_DIRECTORY) + close of the same path
 *
 * Where: a fresh directory under os.tmpdir() (a real disk here; on a tmpfs
 * fsync is free and the write ratios mean nothing).
 */

export const BENCHES: readonly BenchIdentity[] = [{ id: 'receipt-store-writes', item: 3, title: 'Durable file primitives (receipt-store)' }];

const SIZES: Record<BenchMode, { readonly runs: number; readonly scale: number }> = {
  smoke: { runs: 1, scale: 0.05 },
  default: { runs: 7, scale: 1 },
  full: { runs: 11, scale: 2 },
};

/** A terminal receipt as the minion commits it (fixed values: same bytes every run). */
const RECEIPT = {
  protocol: 1,
  minion_id: 'client-0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0b',
  request_id: '0190e6a5-1c2d-7e3f-9a4b-5c6d7e8f9a0c',
  jid: '20261129082300245264',
  profile: 'custom',
  state_digest: '3f0a1e5c9b7d2468ace013579bdf02468ace13579bdf02468ace13579bdf0246',
  status: 'succeeded',
  passed: 60,
  total: 60,
};
const RECEIPT_BYTES = Buffer.from(JSON.stringify(RECEIPT));

interface Pair {
  readonly label: string;
  readonly iterations: number;
  readonly target: Target | null;
  readonly value: () => void | Promise<void>;
  readonly floor: () => void | Promise<void>;
}

export async function run(mode: BenchMode): Promise<BenchResult[]> {
  const size = SIZES[mode];
  const base = mkdtempSync(join(tmpdir(), 'oduflow-bench-receipt-'));
  const deepPath = join(base, 'var', 'lib', 'oduflow');
  const floorPath = join(base, 'floor');
  let dir: PrivateDir | undefined;
  try {
    const store = openPrivateDir(deepPath, { create: true });
    dir = store;
    mkdirSync(floorPath, { mode: 0o700 });
    store.writeJsonAtomic('receipt.json', RECEIPT);
    bareAtomicWrite(floorPath, 'receipt.json', RECEIPT_BYTES);
    let fresh = 0;
    let floorFresh = 0;
    let sink: unknown;
    const pairs: Pair[] = [
      {
        label: 'writeJsonAtomic: new name (no replace)',
        iterations: 30,
        target: { kind: 'ratio_max', value: 1.25 },
        value: () => store.writeJsonAtomic(`receipt-${fresh++}.json`, RECEIPT),
        floor: () => bareAtomicWrite(floorPath, `receipt-${floorFresh++}.json`, RECEIPT_BYTES),
      },
      {
        label: 'writeJsonAtomic: replace',
        iterations: 30,
        target: { kind: 'ratio_max', value: 1.25 },
        value: () => store.writeJsonAtomic('record.json', RECEIPT, { replace: true }),
        floor: () => bareAtomicWrite(floorPath, 'record.json', RECEIPT_BYTES),
      },
      {
        label: 'readJson(receipt)',
        iterations: 2_000,
        target: { kind: 'ratio_max', value: 3 },
        value: () => {
          sink = store.readJson('receipt.json');
        },
        floor: () => {
          sink = JSON.parse(readFileSync(join(floorPath, 'receipt.json'), 'utf8'));
        },
      },
      {
        label: 'tryLockSync + release',
        iterations: 2_000,
        // Node has no flock: the floor lacks the lock and unlock calls and the no-follow and owner checks, five
        // system calls against two, so about 3–6× is the design; 10× catches a retry loop or a second open.
        target: { kind: 'ratio_max', value: 10 },
        value: () => {
          const lock = store.tryLockSync('request.lock');
          if (lock === undefined) throw new Error('uncontended lock was busy');
          lock.release();
        },
        floor: () => closeSync(openSync(join(deepPath, 'request.lock'), constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600)),
      },
      {
        label: 'lock (wait 1 s), held, released on the next tick',
        iterations: 40,
        target: { kind: 'ratio_max', value: 2 },
        value: async () => {
          // Another open file description holds it: the first attempt fails, the
          // holder lets go right after, and the waiter's backoff picks it up.
          const held = store.tryLockSync('request.lock');
          if (held === undefined) throw new Error('uncontended lock was busy');
          setImmediate(() => held.release());
          const lock = await store.lock('request.lock', { wait: 1000 });
          lock.release();
        },
        floor: () => sleep(1),
      },
      {
        label: 'openPrivateDir (3 levels below the temp dir) + close',
        iterations: 500,
        target: null,
        value: () => {
          const opened = openPrivateDir(deepPath);
          sink = opened.path;
          opened.close();
        },
        floor: () => closeSync(openSync(deepPath, constants.O_RDONLY | constants.O_DIRECTORY)),
      },
    ];
    const rows: BenchRow[] = [];
    for (const pair of pairs) {
      const iterations = Math.max(1, Math.round(pair.iterations * size.scale));
      const meanMs = (work: () => void | Promise<void>) => async (): Promise<number> =>
        (await timeMs(async () => {
          for (let i = 0; i < iterations; i += 1) await work();
        })) / iterations;
      await pair.value();
      await pair.floor();
      const { values, floors } = await interleaved(size.runs, meanMs(pair.value), meanMs(pair.floor));
      rows.push(rowOf({ label: pair.label, unit: 'ms', values, floors, target: pair.target }));
    }
    if (sink === undefined) throw new Error('nothing was read');
    return [
      {
        schema: 1,
        ...(BENCHES[0] as BenchIdentity),
        method: `Each primitive and its floor run as a mean over a batch of calls (30 writes, 40 hand-overs, 500 to 2 000 of the cheap calls, scaled by the mode), ${size.runs} batches each, interleaved (alternating which goes first), in one directory under os.tmpdir() (a real disk here), with a ${RECEIPT_BYTES.length}-byte receipt.`,
        floor:
          'For the writes, a bare write + fsync + rename + directory fsync of the same bytes in the same directory; for readJson, readFileSync + JSON.parse; for tryLockSync, open + close of the lock file; for a contended lock, the 1 ms timer of the waiter’s first backoff step; for openPrivateDir, one open(O_DIRECTORY) of the same path.',
        mode,
        rows,
        chart: null,
        notes: [
          'writeJsonAtomic adds to the floor a flock on the temporary file (so a concurrent stale-temp sweep leaves a live writer alone), a random temporary name, and renameat2(RENAME_NOREPLACE) for a new name: a few microseconds against two fsyncs of milliseconds, so the ratio shows how close a durable write is to what the disk forces.',
          'tryLockSync’s floor is open + close of the lock file: Node has no flock, so the floor lacks the lock and unlock calls and the no-follow and owner checks (five system calls against two); its target of 10× allows that and catches a retry loop or a second open.',
          'openPrivateDir is reported only: it opens each component without following links, checks owner and mode, and sweeps stale temporary files, once per process; no single call is its floor.',
        ],
        ok: true,
      },
    ];
  } finally {
    dir?.close();
    rmSync(base, { recursive: true, force: true });
  }
}
