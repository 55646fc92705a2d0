import { applyEvent, createRequestRecord, type ProtocolRequestRecord } from '@oduflow/protocol';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, bench, describe } from 'vitest';
import { createFileRecordStore } from '../src/file-record-store.js';
import { encodeRecord } from '../src/record-codec.js';
import type { RecordStore } from '../src/record-store.js';

/*
 * The dispatch unit of the file store (withTarget → blockers → create), with
 * 10, 1 000 and 10 000 existing records spread over 500 targets. Each
 * iteration dispatches to the next of the 500 targets a new request that the
 * capability check rejected (so the target stays unblocked and the store
 * barely grows). `list({ unresolved: true })` reads every record: it is what
 * the blocking check cost before the target index, shown for comparison.
 * `open` is the index check an opener does (directory listings only).
 *
 * Run: npm run bench (vitest bench --run). Seeding writes the on-disk layout
 * directly (no fsync) so that 10 000 records are ready in seconds.
 */

const TARGETS = 500;
const SIZES = [10, 1_000, 10_000] as const;
const AT = '2026-11-29T10:00:00.000Z';

const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const jid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();

function settled(n: number): ProtocolRequestRecord {
  const prepared = createRequestRecord({ request_id: requestId(n), minion_id: minion(n % TARGETS), profile: 'configure', state_digest: '', jid: jid(n), at: AT });
  return (
    n % 2 === 0
      ? applyEvent(prepared, { type: 'capability_failed', at: AT, reason: 'capability_missing' })
      : applyEvent(applyEvent(prepared, { type: 'intent_recorded', at: AT }), { type: 'reconciled', at: AT, reason: 'checked', actor: 'ops' })
  ) as ProtocolRequestRecord;
}

function writePrivate(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value), { mode: 0o600 });
}

/** A store directory in the current layout holding `count` settled records over the 500 targets. */
function seed(count: number): { root: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-bench-'));
  chmodSync(dir, 0o700);
  const root = join(dir, 'store');
  for (const sub of ['', 'requests', 'jids', 'locks', 'targets', 'unbound']) mkdirSync(join(root, sub), { mode: 0o700 });
  for (let t = 0; t < TARGETS; t += 1) mkdirSync(join(root, 'targets', minion(t)), { mode: 0o700 });
  for (let n = 0; n < count; n += 1) {
    const record = settled(n);
    const entry = { request_id: record.request_id, minion_id: record.minion_id };
    writePrivate(join(root, 'jids', `${record.jid}.json`), entry);
    writePrivate(join(root, 'targets', record.minion_id, `${record.request_id}.json`), entry);
    writePrivate(join(root, 'requests', `${record.request_id}.json`), encodeRecord(record));
  }
  return { root, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

for (const size of SIZES) {
  describe(`${size} existing records over ${TARGETS} targets`, async () => {
    const seeded = seed(size);
    const store: RecordStore = await createFileRecordStore({ root: seeded.root });
    let next = 1_000_000;
    afterAll(async () => {
      await store.close();
      seeded.remove();
    });

    bench('dispatch unit (withTarget → blockers → create)', async () => {
      const n = next++;
      const record = settled(n);
      await store.withTarget(record.minion_id, async (unit) => {
        if ((await unit.blockers()).length > 0) throw new Error('target unexpectedly blocked');
        const outcome = await unit.create(record);
        if (!outcome.created) throw new Error(`not created: ${outcome.reason}`);
      });
    });

    bench('blocking check alone (withTarget → blockers)', async () => {
      await store.withTarget(minion(next++ % TARGETS), (unit) => unit.blockers());
    });

    bench('for comparison: list({ unresolved: true }) (reads every record)', async () => {
      await store.list({ unresolved: true });
    }, { iterations: 5, time: 0 });

    bench('open (index check: listings and one read per record)', async () => {
      await (await createFileRecordStore({ root: seeded.root })).close();
    }, { iterations: 5, time: 0 });
  });
}
