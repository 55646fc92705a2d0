import { applyEvent, createRequestRecord, type ProtocolRequestRecord } from '@oduflow/protocol';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, bench, describe } from 'vitest';
import { createFileRecordStore } from '../src/file-record-store.js';
import { migrateFileRecordStore } from '../src/migrate-store.js';
import { encodeRecord } from '../src/record-codec.js';
import type { RecordStore } from '../src/record-store.js';

/*
 * The file store as its history grows: 1 000, 10 000 and 100 000 settled
 * records over 500 targets, plus 50 requests still published on 50 other
 * targets (the unresolved ones). Every measured operation goes through the
 * public API and must stay flat in the number of records:
 *
 *   open             createFileRecordStore + close: reads the format marker, nothing else
 *   dispatch unit    withTarget → blockers → create of a request the capability check
 *                    rejected, on the next of the 500 targets (so none is ever blocked)
 *   blocking check   withTarget → blockers alone
 *   list unresolved  list({ unresolved: true }): the 50 published requests, from the index
 *
 * One store grows in place (each size's setup adds the records it lacks), so
 * 100 000 records cost 100 000 seeds, not 111 000. Seeding writes records,
 * JIDs and target entries straight to disk in the layout of the release
 * before the format marker (no fsync), then runs the real migrateFileRecordStore,
 * which adds the unresolved index and the marker exactly as an upgrade would.
 *
 * Where: ODUFLOW_BENCH_DIR, by default /dev/shm (tmpfs). The 100 000-record
 * store is 300 000 files; on the reference machine's ext4 (mounted with
 * online discard) creating and removing them takes about 7 minutes and loads
 * the disk everyone shares, and that load, not this code, then decides the
 * fsync-bound dispatch numbers. What this bench guards is that no operation
 * grows with the store; what an fsync costs on a real disk is the
 * receipt-store bench's subject. ODUFLOW_BENCH_DIR=/var/lib npm run bench
 * measures a real disk, where the fsyncs dominate the dispatch unit.
 *
 * Run: npm run bench (vitest bench --run); ceilings in bench/targets.json.
 */

const TARGETS = 500;
const UNRESOLVED = 50;
const SIZES = [1_000, 10_000, 100_000] as const;
const AT = '2026-11-29T10:00:00.000Z';

const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const jid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();

function prepared(n: number, target: number): ProtocolRequestRecord {
  return createRequestRecord({ request_id: requestId(n), minion_id: minion(target), profile: 'configure', state_digest: '', jid: jid(n), at: AT });
}

/** Settled records: half rejected at the capability check, half published and reconciled. */
function settled(n: number): ProtocolRequestRecord {
  const record = prepared(n, n % TARGETS);
  return (
    n % 2 === 0
      ? applyEvent(record, { type: 'capability_failed', at: AT, reason: 'capability_missing' })
      : applyEvent(applyEvent(record, { type: 'intent_recorded', at: AT }), { type: 'reconciled', at: AT, reason: 'checked', actor: 'ops' })
  ) as ProtocolRequestRecord;
}

function published(k: number): ProtocolRequestRecord {
  const record = prepared(900_000 + k, TARGETS + k);
  return applyEvent(applyEvent(record, { type: 'intent_recorded', at: AT }), { type: 'publish_acked', at: AT }) as ProtocolRequestRecord;
}

const benchDir = process.env['ODUFLOW_BENCH_DIR'] ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());
const dir = mkdtempSync(join(benchDir, 'oduflow-bench-'));
chmodSync(dir, 0o700);
const root = join(dir, 'store');
let seeded = 0;
let store: RecordStore | undefined;

function writePrivate(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value), { mode: 0o600 });
}

/** Writes a record with its JID and target entries, as the release before the marker laid them out. */
function writeAtRest(record: ProtocolRequestRecord): void {
  const entry = { request_id: record.request_id, minion_id: record.minion_id };
  mkdirSync(join(root, 'targets', record.minion_id), { recursive: true, mode: 0o700 });
  writePrivate(join(root, 'jids', `${record.jid}.json`), entry);
  writePrivate(join(root, 'targets', record.minion_id, `${record.request_id}.json`), entry);
  writePrivate(join(root, 'requests', `${record.request_id}.json`), encodeRecord(record));
}

/** The store holding at least `size` settled records (and the 50 published ones), open. */
async function storeOf(size: number): Promise<RecordStore> {
  if (seeded < size) {
    await store?.close();
    if (seeded === 0) {
      for (const sub of ['', 'requests', 'jids', 'locks', 'targets']) mkdirSync(join(root, sub), { mode: 0o700 });
      for (let k = 0; k < UNRESOLVED; k += 1) writeAtRest(published(k));
    }
    for (let n = seeded; n < size; n += 1) writeAtRest(settled(n));
    seeded = size;
    // On a real disk, write the seed back now, not during the measurements.
    execFileSync('sync', ['-f', root]);
    const report = await migrateFileRecordStore({ root });
    if (report.unresolved !== UNRESOLVED) throw new Error(`seeded ${report.unresolved} unresolved requests, expected ${UNRESOLVED}`);
    store = await createFileRecordStore({ root });
  }
  if (store === undefined) throw new Error('no store');
  return store;
}

afterAll(async () => {
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

let next = 1_000_000;

for (const size of SIZES) {
  describe(`${size} records over ${TARGETS} targets, ${UNRESOLVED} unresolved`, () => {
    const options = { throws: true, setup: async () => {
        await storeOf(size);
      },
    };

    bench('open (reads the format marker)', async () => {
      await (await createFileRecordStore({ root })).close();
    }, options);

    bench('dispatch unit (withTarget → blockers → create)', async () => {
      const record = settled(next++);
      await (await storeOf(size)).withTarget(record.minion_id, async (unit) => {
        if ((await unit.blockers()).length > 0) throw new Error('target unexpectedly blocked');
        const outcome = await unit.create(record);
        if (!outcome.created) throw new Error(`not created: ${outcome.reason}`);
      });
    }, options);

    bench('blocking check alone (withTarget → blockers)', async () => {
      await (await storeOf(size)).withTarget(minion(next++ % TARGETS), (unit) => unit.blockers());
    }, options);

    bench('list({ unresolved: true })', async () => {
      const unresolved = await (await storeOf(size)).list({ unresolved: true });
      if (unresolved.length !== UNRESOLVED) throw new Error(`listed ${unresolved.length} unresolved requests`);
    }, options);
  });
}
