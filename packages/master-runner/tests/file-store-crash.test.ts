import { applyEvent, createRequestRecord, isBlocking, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { admissionKey } from '../src/admission.js';
import { createFileRecordStore } from '../src/file-record-store.js';
import { migrateFileRecordStore } from '../src/migrate-store.js';
import type { RecordStore } from '../src/record-store.js';
import { MINION, OTHER_MINION, refusal, scratchDir } from './support/harness.js';
import { runStoreJob, startStoreJob, type StoreRun } from './support/store-process.js';

/*
 * The file store's own durable boundaries (S1–S8, crash-points.ts), each hit
 * by a real SIGKILL in a separate process, then recovered by this process
 * from what is on disk.
 */

const AT = '2026-11-29T10:00:00.000Z';
const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const jid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();

function prepared(n: number, minionId = MINION, jidNumber = n): ProtocolRequestRecord {
  return createRequestRecord({ request_id: requestId(n), minion_id: minionId, profile: 'configure', state_digest: '', jid: jid(jidNumber), at: AT });
}

function reconciled(record: RequestRecord): RequestRecord {
  return applyEvent(record, { type: 'reconciled', at: AT, reason: 'checked on the host', actor: 'ops' });
}

function killed(run: StoreRun): void {
  expect(run.signal, `stdout: ${run.stdout} stderr: ${run.stderr}`).toBe('SIGKILL');
}

let root: string;
let remove: () => void;
const opened: RecordStore[] = [];

beforeEach(() => {
  const scratch = scratchDir('oduflow-store-crash-');
  root = join(scratch.dir, 'store');
  remove = scratch.remove;
});
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  remove();
});

async function open(lockWaitMs = 10_000): Promise<RecordStore> {
  const store = await createFileRecordStore({ root, lockWaitMs });
  opened.push(store);
  return store;
}

const entries = (...path: string[]): string[] => {
  const dir = join(root, ...path);
  return existsSync(dir) ? readdirSync(dir).sort() : [];
};

async function blockerIds(store: RecordStore, minionId = MINION): Promise<string[]> {
  return (await store.withTarget(minionId, (u) => u.blockers())).map((r) => r.request_id);
}

describe('the crash seam in production', () => {
  it('is never armed by the environment: with ODUFLOW_TEST_CRASH_AT set and no crashAt given, every step runs to its end', async () => {
    await (await open()).close();
    for (const point of ['S1', 'S2', 'S3', 'S4', 'S5', 'S6']) {
      const env = { ODUFLOW_TEST_CRASH_AT: point };
      const n = Number(point.slice(1));
      const create = await runStoreJob({ op: 'create', root, record: prepared(n) }, env);
      expect(create, create.stderr).toMatchObject({ code: 0, signal: null });
      expect(create.stdout).toContain('DONE {"created":true');
      expect((await runStoreJob({ op: 'update', root, record: reconciled(prepared(n)) }, env)).code).toBe(0);
      expect((await runStoreJob({ op: 'migrate', root }, env)).code).toBe(0);
    }
    expect((await (await open()).list()).map((r) => r.state)).toEqual(Array(6).fill('reconciled'));
  });
});

describe('SIGKILL inside a create (real process)', () => {
  for (const point of ['S1', 'S2', 'S3'] as const) {
    it(`${point}: the JID stays burned, nothing blocks, and the request can be created again under a new JID`, async () => {
      await (await open()).close();
      killed(await runStoreJob({ op: 'create', root, record: prepared(1), at: point }));
      expect(entries('jids')).toEqual([`${jid(1)}.json`]);
      expect(entries('requests')).toEqual([]);
      expect(entries('targets', MINION)).toEqual(point === 'S1' ? [] : [`${requestId(1)}.json`]);
      expect(entries('unresolved', MINION)).toEqual(point === 'S3' ? [`${requestId(1)}.json`] : []);

      const store = await open();
      // No record, so no history: an entry never outlives the write it describes.
      expect(await store.history(requestId(1))).toBeUndefined();
      expect(await blockerIds(store)).toEqual([]);
      expect(await store.list({ unresolved: true })).toEqual([]);
      expect(await store.withTarget(OTHER_MINION, (u) => u.create(prepared(2, OTHER_MINION, 1)))).toEqual({ created: false, reason: 'jid_taken' });
      expect(await store.withTarget(MINION, (u) => u.create(prepared(1, MINION, 5)))).toMatchObject({ created: true });
      expect(await blockerIds(store)).toEqual([requestId(1)]);
      expect((await store.list({ unresolved: true })).map((r) => r.jid)).toEqual([jid(5)]);
      expect((await store.history(requestId(1)))?.entries.map((e) => [e.seq, e.event])).toEqual([[1, 'created']]);
    });
  }
});

describe('SIGKILL inside an admission\'s create unit (real process)', () => {
  const KEY = admissionKey({ tenant: 'acme', actor: 'ci', action: 'request.create', key: 'k-1' }, { minionId: MINION, profile: 'configure', stateDigest: '' });
  const OTHER_CONTENT = admissionKey({ tenant: 'acme', actor: 'ci', action: 'request.create', key: 'k-1' }, { minionId: MINION, profile: 'production', stateDigest: '' });
  const CREATED = Date.parse(AT);
  const LEASE = { leaseMs: 60_000 }; // what store-child claims with
  const keyFile = (): Record<string, unknown> => JSON.parse(readFileSync(join(root, 'keys', `${KEY.keyHash}.json`), 'utf8')) as Record<string, unknown>;
  const claimOutbox = (store: RecordStore) => store.claimOutbox({ limit: 10, now: new Date(CREATED + 1_000), leaseMs: 30_000 });

  it('S7: an outbox entry without its record is never handed out and is removed; the key frees itself when its lease lapses; nothing blocks', async () => {
    await (await open()).close();
    killed(await runStoreJob({ op: 'create', root, record: prepared(1), key: KEY, outbox: { stateDataJson: '' }, at: 'S7' }));
    expect(entries('requests')).toEqual([]);
    expect(entries('outbox')).toEqual([`${requestId(1)}.json`]);
    expect(statSync(join(root, 'outbox', `${requestId(1)}.json`)).mode & 0o777).toBe(0o600);
    expect(keyFile()).toMatchObject({ state: 'claimed', request_id: requestId(1), bound_at: null });

    const store = await open();
    expect(await blockerIds(store)).toEqual([]);
    expect(await claimOutbox(store)).toEqual([]);
    expect(entries('outbox')).toEqual([]); // no create holds the target: the entry was an orphan
    // The claim is still live (nothing says its admitter died), then lapses with nothing stored.
    expect(await store.claimKey(KEY, { requestId: requestId(2), now: new Date(CREATED + 1_000), ...LEASE })).toEqual({ kind: 'in_flight' });
    expect(await store.claimKey(OTHER_CONTENT, { requestId: requestId(2), now: new Date(CREATED + 1_000), ...LEASE })).toEqual({ kind: 'mismatch' });
    expect(await store.claimKey(OTHER_CONTENT, { requestId: requestId(2), now: new Date(CREATED + 60_001), ...LEASE })).toEqual({ kind: 'claimed', requestId: requestId(2) });
    expect(await store.withTarget(OTHER_MINION, (u) => u.create(prepared(3, OTHER_MINION, 1)))).toEqual({ created: false, reason: 'jid_taken' });
  });

  it('S7 while the create is still under way (held, not killed): its entry is not handed out and not removed until the target lock shows the create is over', async () => {
    await (await open()).close();
    const creating = startStoreJob({ op: 'create', root, record: prepared(1), key: KEY, outbox: { stateDataJson: '' }, at: 'S7', then: 'hold' });
    try {
      await creating.holding();
      const store = await open(200);
      expect(await claimOutbox(store)).toEqual([]);
      expect(entries('outbox')).toEqual([`${requestId(1)}.json`]);
      // The create holds the key's lock too: a claim of that key waits for it (here: gives up, store_busy) instead of reading a half-done unit.
      expect(await refusal(store.claimKey(KEY, { requestId: requestId(2), now: new Date(CREATED + 120_000), ...LEASE }))).toMatchObject({ code: 'store_busy' });
      expect(await refusal(store.releaseKey(KEY, requestId(1)))).toMatchObject({ code: 'store_busy' });
    } finally {
      killed(await creating.kill());
    }
    expect(await claimOutbox(await open())).toEqual([]);
    expect(entries('outbox')).toEqual([]);
  });

  it('S8: the record admits the key although it is still marked claimed: the same content replays it, other content is refused, and the entry is relayed', async () => {
    await (await open()).close();
    killed(await runStoreJob({ op: 'create', root, record: prepared(1), key: KEY, outbox: { stateDataJson: '' }, at: 'S8' }));
    expect(entries('requests')).toEqual([`${requestId(1)}.json`]);
    expect(keyFile()).toMatchObject({ state: 'claimed', request_id: requestId(1) });

    const store = await open();
    // Within the lease and after it: the record, not the lease, decides.
    expect(await store.claimKey(KEY, { requestId: requestId(2), now: new Date(CREATED + 1_000), ...LEASE })).toEqual({ kind: 'admitted', requestId: requestId(1) });
    expect(await store.claimKey(KEY, { requestId: requestId(2), now: new Date(CREATED + 3_600_000), ...LEASE })).toEqual({ kind: 'admitted', requestId: requestId(1) });
    expect(await store.claimKey(OTHER_CONTENT, { requestId: requestId(2), now: new Date(CREATED + 3_600_000), ...LEASE })).toEqual({ kind: 'mismatch' });
    expect(keyFile()).toMatchObject({ state: 'bound', request_id: requestId(1), bound_at: AT });
    await store.releaseKey(KEY, requestId(1));
    expect(await store.claimKey(KEY, { requestId: requestId(2), now: new Date(CREATED + 1_000), ...LEASE })).toEqual({ kind: 'admitted', requestId: requestId(1) });
    expect(await blockerIds(store)).toEqual([requestId(1)]);
    expect(await claimOutbox(store)).toEqual([{ requestId: requestId(1), stateDataJson: '', enqueuedAt: AT, attempts: 1 }]);
  });

  it('runs to its end with ODUFLOW_TEST_CRASH_AT=S7 or S8 in the environment and no seam given', async () => {
    await (await open()).close();
    for (const [n, point] of [[1, 'S7'], [2, 'S8']] as const) {
      const key = admissionKey({ tenant: 'acme', actor: 'ci', action: 'request.create', key: `k-${n}` }, { minionId: MINION, profile: 'configure', stateDigest: '' });
      const run = await runStoreJob({ op: 'create', root, record: prepared(n), key, outbox: { stateDataJson: '' } }, { ODUFLOW_TEST_CRASH_AT: point });
      expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
      expect(run.stdout).toContain('DONE {"created":true');
    }
    expect(entries('requests')).toEqual([`${requestId(1)}.json`, `${requestId(2)}.json`]);
    expect(entries('outbox')).toHaveLength(2);
  });
});

describe('SIGKILL inside an update (real process)', () => {
  it('S4: a record settled on disk whose unresolved entry outlived it frees the target; migrate-store removes the entry', async () => {
    const store = await open();
    await store.withTarget(MINION, (u) => u.create(prepared(1)));
    killed(await runStoreJob({ op: 'update', root, record: reconciled(prepared(1)), at: 'S4' }));
    expect((await store.get(requestId(1)))?.state).toBe('reconciled');
    // The record and its history entry are one write: the change is there with its entry.
    expect((await store.history(requestId(1)))?.entries.map((e) => [e.seq, e.event, e.to_state])).toEqual([
      [1, 'created', 'prepared'],
      [2, 'reconciled', 'reconciled'],
    ]);
    expect(entries('unresolved', MINION)).toEqual([`${requestId(1)}.json`]);

    expect(await blockerIds(store)).toEqual([]);
    expect(await store.list({ unresolved: true })).toEqual([]);
    expect(await store.withTarget(MINION, (u) => u.create(prepared(2)))).toMatchObject({ created: true });
    expect(await migrateFileRecordStore({ root })).toMatchObject({ records: 2, unresolved: 1, staleEntriesRemoved: 1 });
    expect(entries('unresolved', MINION)).toEqual([`${requestId(2)}.json`]);
  });
});

describe('SIGKILL during migrate-store (real process)', () => {
  /** A store of the layout before any index: 30 records over two targets, every third still blocking. */
  async function version0Store(): Promise<void> {
    const store = await open();
    for (let n = 1; n <= 30; n += 1) {
      const minionId = n % 2 === 0 ? MINION : OTHER_MINION;
      await store.withTarget(minionId, (u) => u.create(prepared(n, minionId)));
      if (n % 3 !== 0) await store.updateRequest(requestId(n), reconciled, { event: 'reconciled', source: 'reconcile' });
    }
    await store.close();
    opened.splice(0);
    for (const name of ['targets', 'unbound', 'unresolved', 'format.json']) rmSync(join(root, name), { recursive: true });
  }

  async function expectComplete(): Promise<void> {
    const store = await open();
    const blocking = (await store.list()).filter(isBlocking).map((r) => r.request_id);
    expect(blocking).toHaveLength(10);
    expect((await store.list({ unresolved: true })).map((r) => r.request_id)).toEqual(blocking);
    expect(entries('unresolved', MINION).length + entries('unresolved', OTHER_MINION).length).toBe(10);
    expect(entries('targets', MINION).length + entries('targets', OTHER_MINION).length).toBe(30);
    expect((await blockerIds(store)).length).toBe(5);
  }

  for (const [point, nth] of [['S5', 1], ['S5', 17], ['S6', 1]] as const) {
    it(`${point}${point === 'S5' ? ` after record ${nth}` : ''}: the store stays refused until a rerun completes it`, async () => {
      await version0Store();
      killed(await runStoreJob({ op: 'migrate', root, at: point, nth }));
      expect(existsSync(join(root, 'format.json'))).toBe(false);
      expect(await refusal(createFileRecordStore({ root }))).toMatchObject({ code: 'store_format', detail: 'needs_migration' });

      const report = await migrateFileRecordStore({ root });
      expect(report).toMatchObject({ wasCurrent: false, records: 30, unresolved: 10, staleEntriesRemoved: 0 });
      // What the killed run wrote stays: the rerun writes only the rest (records in id order, every third blocking).
      const written = point === 'S6' ? 40 : nth + Math.floor(nth / 3);
      expect(report.historyEntriesWritten + report.unresolvedEntriesWritten).toBe(40 - written);
      await expectComplete();
    });
  }

  it('holds the store lock while it runs: units and openers wait, and a rerun after a SIGKILL completes', async () => {
    await version0Store();
    await migrateFileRecordStore({ root });
    const running = await open(200); // opened while the store was current
    const migration = startStoreJob({ op: 'migrate', root, at: 'S5', nth: 5, then: 'hold' });
    try {
      await migration.holding();
      expect(await refusal(running.withTarget(MINION, (u) => u.create(prepared(40))))).toMatchObject({ code: 'store_busy' });
      expect(await refusal(running.updateRequest(requestId(3), reconciled, { event: 'reconciled', source: 'reconcile' }))).toMatchObject({ code: 'store_busy' });
      expect(await refusal(running.list({ unresolved: true }))).toMatchObject({ code: 'store_busy' });
      expect(await refusal(createFileRecordStore({ root, lockWaitMs: 200 }))).toMatchObject({ code: 'store_busy' });
    } finally {
      killed(await migration.kill());
    }
    // Killed mid-run on a current store: its marker was removed first, so openers refuse until a rerun.
    expect(await refusal(createFileRecordStore({ root }))).toMatchObject({ code: 'store_format', detail: 'needs_migration' });
    expect(await migrateFileRecordStore({ root })).toMatchObject({ wasCurrent: false, records: 30, unresolved: 10, unresolvedEntriesWritten: 0 });
    await expectComplete();
    // The store opened before the migration works again once the lock is free.
    expect(await running.withTarget(MINION, (u) => u.create(prepared(41, MINION)))).toMatchObject({ created: true });
  });
});
