import type { RequestRecord } from '@oduflow/protocol';
import type { AdmissionKey } from '../../src/record-store.js';
import { createFileRecordStore } from '../../src/file-record-store.js';
import { migrateFileRecordStore } from '../../src/migrate-store.js';
import type { StoreCrashPoint } from '../../src/crash-points.js';

/*
 * A separate Node process that works on a file store and SIGKILLs itself at a
 * store crash point (or stops there, holding what it holds, until it is
 * killed). Bundled by store-process.ts; argv[2] is a JSON Job.
 *
 *   create   withTarget(record.minion_id) → create(record), with `key` (claimed first,
 *            under the record's request id) and `outbox` when given: an admission's unit
 *   update   updateRequest(record.request_id) → the given record
 *   migrate  migrateFileRecordStore
 *
 * `at` names the point and `nth` which arrival at it (S5 is reached once per
 * record). `then: "kill"` SIGKILLs there; `then: "hold"` prints HOLDING and
 * blocks the thread until the parent kills it. Without `at` the job passes no
 * seam (the production default), runs to its end and prints DONE <json>.
 */

interface Job {
  readonly op: 'create' | 'update' | 'migrate';
  readonly root: string;
  readonly record?: RequestRecord;
  readonly key?: AdmissionKey;
  readonly outbox?: { readonly stateDataJson: string };
  readonly at?: StoreCrashPoint;
  readonly nth?: number;
  readonly then?: 'kill' | 'hold';
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;
let arrivals = 0;

function crashAt(point: StoreCrashPoint): void {
  if (point !== job.at) return;
  arrivals += 1;
  if (arrivals !== (job.nth ?? 1)) return;
  if (job.then === 'hold') {
    process.stdout.write('HOLDING\n', () => undefined);
    // Blocks this thread for good (locks stay held); only the parent's SIGKILL ends it.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
  process.kill(process.pid, 'SIGKILL');
}

function recordOf(value: RequestRecord | undefined): RequestRecord {
  if (value === undefined) throw new Error('this job needs a record');
  return value;
}

async function run(): Promise<unknown> {
  // Without a point, no seam is passed at all: the job runs with the production default.
  const seam = job.at === undefined ? {} : { crashAt };
  if (job.op === 'migrate') return migrateFileRecordStore({ root: job.root, lockWaitMs: 10_000, ...seam });
  const store = await createFileRecordStore({ root: job.root, lockWaitMs: 10_000, ...seam });
  try {
    const record = recordOf(job.record);
    if (job.op === 'update') {
      const change = record.state === 'reconciled' ? ({ event: 'reconciled', source: 'reconcile' } as const) : ({ event: 'observed', source: 'poller' } as const);
      return await store.updateRequest(record.request_id, () => record, change);
    }
    if (record.protocol !== 1) throw new Error('only protocol 1 records are created');
    const { key, outbox } = job;
    if (key !== undefined) {
      const claim = await store.claimKey(key, { requestId: record.request_id, now: new Date(record.created_at), leaseMs: 60_000 });
      if (claim.kind !== 'claimed') throw new Error(`the key was not free: ${claim.kind}`);
    }
    const options = { ...(key === undefined ? {} : { key }), ...(outbox === undefined ? {} : { outbox }) };
    return await store.withTarget(record.minion_id, (unit) => unit.create(record, options));
  } finally {
    await store.close();
  }
}

process.stdout.write(`DONE ${JSON.stringify(await run())}\n`);
