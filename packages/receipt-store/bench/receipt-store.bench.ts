/*
 * Benchmarks of the durable file primitives on a real file system: a fresh
 * directory under os.tmpdir() (override with ODUFLOW_BENCH_DIR to measure the
 * disk the store really lives on; a tmpfs would make fsync free and the
 * numbers meaningless). Every write fsyncs the file and its directory, as in
 * production. Run: `npm run bench` in this package (or at the root).
 * See docs/benchmarks.md.
 *
 * What an operator needs, and why:
 * - writeJsonAtomic: the master's file record store rewrites a request
 *   record (replace) on every event and reserves JIDs and index entries with
 *   first writes (no replace); a minion commits 3 atomic writes per apply.
 *   An apply takes seconds, so a few ms per write is fine there, but a master
 *   recording 500 poll results per 10 s round needs ≫ 50 writes/s (at 10 ms,
 *   500 writes already take half the round). Both kinds fsync the same way.
 * - readJson: a status answer reads a receipt; ≫ 50/s for the poll load.
 * - tryLockSync / lock: the master takes a lock (with a wait) per request
 *   event; ≫ 50/s uncontended. A contended `lock` polls with a backoff that
 *   starts at 1 ms, so a hand-over costs about 1 ms plus a timer tick, not a
 *   busy loop; measured too.
 * - openPrivateDir: opened once per process or request; must stay ≪ 10 ms.
 *
 * fsync latency depends on the disk far more than on this code, so the
 * enforced limits are generous regression ceilings: bench/targets.json
 * fails `npm run bench` when a mean is more than ~10× slower than measured on
 * the reference 2-core machine (docs/benchmarks.md). Bench names are its keys.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bench, describe } from 'vitest';
import { type PrivateDir, openPrivateDir } from '../src/index.js';

const base = mkdtempSync(join(process.env['ODUFLOW_BENCH_DIR'] ?? tmpdir(), 'receipt-store-bench-'));
const removeBase = (): void => rmSync(base, { recursive: true, force: true });
// Benchmark mode runs no afterAll hooks, and the worker may be killed rather
// than exit: tinybench's per-bench teardown (called after each bench's
// measured run, also when it threw) removes the directory after the last one.
let registered = 0;
let finished = 0;
function storeBench(name: string, fn: () => void | Promise<void>): void {
  registered += 1;
  bench(name, fn, {
    // A throwing bench must fail the run; by default tinybench records the error and vitest passes.
    throws: true,
    teardown: (_task, mode) => {
      if (mode === 'run' && ++finished === registered) removeBase();
    },
  });
}
process.on('exit', removeBase); // a filtered or failed run

const DEEP_PATH = join(base, 'var', 'lib', 'oduflow');
const dir = openPrivateDir(DEEP_PATH, { create: true });

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

dir.writeJsonAtomic('receipt.json', RECEIPT);
if (JSON.stringify(dir.readJson('receipt.json')) !== JSON.stringify(RECEIPT)) throw new Error('receipt did not round-trip');

/**
 * No-replace writes need a fresh name each time. A new sub-directory every
 * 1000 writes keeps directories at a realistic size (its creation, one call
 * in 1000, is inside the measurement).
 */
let writes = 0;
let fresh: PrivateDir | undefined;
function freshDir(): PrivateDir {
  if (fresh === undefined || writes % 1000 === 0) {
    fresh?.close();
    fresh = dir.subdir(`fresh-${writes}`, { create: true });
  }
  return fresh;
}

let sink: unknown;

describe('atomic JSON files (fsync of file and directory)', () => {
  storeBench('writeJsonAtomic: new name (no replace)', () => {
    const target = freshDir();
    target.writeJsonAtomic(`receipt-${writes}.json`, RECEIPT);
    writes += 1;
  });
  storeBench('writeJsonAtomic: replace', () => {
    dir.writeJsonAtomic('record.json', RECEIPT, { replace: true });
  });
  storeBench('readJson(receipt)', () => {
    sink = dir.readJson('receipt.json');
  });
});

describe('kernel flock locks', () => {
  storeBench('tryLockSync + release', () => {
    const lock = dir.tryLockSync('request.lock');
    if (lock === undefined) throw new Error('uncontended lock was busy');
    lock.release();
  });
  storeBench('lock (wait 1 s, free) + release', async () => {
    const lock = await dir.lock('request.lock', { wait: 1000 });
    lock.release();
  });
  storeBench('lock (wait 1 s, held, released on next tick) + release', async () => {
    // Another open file description holds it: the first attempt fails, the
    // holder lets go right after, and the waiter's backoff picks it up.
    const held = dir.tryLockSync('request.lock');
    if (held === undefined) throw new Error('uncontended lock was busy');
    setImmediate(() => held.release());
    const lock = await dir.lock('request.lock', { wait: 1000 });
    lock.release();
  });
});

describe('private directories', () => {
  storeBench('openPrivateDir(3 levels below the temp dir) + close', () => {
    const opened = openPrivateDir(DEEP_PATH);
    sink = opened.path;
    opened.close();
  });
});

export const lastResult = (): unknown => sink;
