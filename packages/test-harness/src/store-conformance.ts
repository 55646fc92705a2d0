import { MasterRunnerError, type RecordStore } from '@oduflow/master-runner';
import {
  applyEvent,
  createRequestRecord,
  isBlocking,
  type ProtocolRequestRecord,
  type RequestEvent,
  type RequestRecord,
} from '@oduflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { admissionConformanceCases } from './store-conformance-admission.js';
import { historyConformanceCases } from './store-conformance-history.js';

/*
 * The contract every RecordStore must meet (the embedded file store today,
 * PostgreSQL later). It speaks only through the RecordStore interface, so a
 * new store proves itself by calling runRecordStoreConformance with a factory
 * that returns a fresh, empty store.
 */

export interface StoreUnderTest {
  readonly store: RecordStore;
  /**
   * Leaves in the store exactly what a crash inside `create` leaves after the
   * last durable write before the record itself (the file store: JID reserved
   * and every index entry written, record not). A store whose create is one
   * transaction has no such state: it omits this and passes
   * `{ createIsOneTransaction: true }`, and the cases using it are not part of its suite.
   */
  interruptCreate?(record: ProtocolRequestRecord): Promise<void>;
  dispose(): Promise<void>;
}

export type StoreFactory = () => Promise<StoreUnderTest>;

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const OTHER_MINION = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
const AT = '2026-11-29T10:00:00.000Z';

function requestId(n: number): string {
  return `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
}

function jid(n: number): string {
  return (20261129100000000000n + BigInt(n)).toString();
}

function record(n: number, minionId = MINION, jidNumber = n): ProtocolRequestRecord {
  return createRequestRecord({ request_id: requestId(n), minion_id: minionId, profile: 'configure', state_digest: '', jid: jid(jidNumber), at: AT });
}

function step(r: RequestRecord, ...events: RequestEvent['type'][]): RequestRecord {
  return events.reduce<RequestRecord>((current, type) => {
    switch (type) {
      case 'observed':
        return applyEvent(current, {
          type,
          at: AT,
          answer: {
            protocol: 1,
            minion_id: current.minion_id as string,
            request_id: current.request_id,
            jid: current.jid as string,
            profile: 'configure',
            state_digest: '',
            status: 'succeeded',
            passed: 1,
            total: 1,
          },
        });
      case 'reconciled':
        return applyEvent(current, { type, at: AT, reason: 'checked', actor: 'ops' });
      case 'intent_recorded':
      case 'publish_acked':
        return applyEvent(current, { type, at: AT });
      case 'capability_failed':
        return applyEvent(current, { type, at: AT, reason: 'capability_missing' });
      default:
        throw new Error(`store conformance: no test event for ${type}`);
    }
  }, r);
}

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error.code;
    throw error;
  }
  return undefined;
}

async function put(store: RecordStore, r: ProtocolRequestRecord): Promise<void> {
  const outcome = await store.withTarget(r.minion_id, (unit) => unit.create(r));
  expect(outcome.created).toBe(true);
}

export interface ConformanceOptions {
  /**
   * The store's create is one transaction (PostgreSQL): no crash can leave a
   * partial create, so the interrupted-create cases are not registered. Every
   * other store must provide `interruptCreate`, or those cases fail.
   */
  readonly createIsOneTransaction?: boolean;
}

export function runRecordStoreConformance(name: string, makeStore: StoreFactory, options: ConformanceOptions = {}): void {
  describe(`RecordStore conformance: ${name}`, () => {
    let subject: StoreUnderTest;
    let store: RecordStore;

    beforeEach(async () => {
      subject = await makeStore();
      store = subject.store;
    });
    afterEach(async () => {
      await subject.dispose();
    });

    it('answers undefined for a request it does not hold', async () => {
      expect(await store.get(requestId(1))).toBeUndefined();
      expect(await store.list()).toEqual([]);
    });

    it('returns a created record exactly as it was given', async () => {
      await put(store, record(1));
      expect(await store.get(requestId(1))).toEqual(record(1));
    });

    it('refuses a second record under a JID that is already reserved', async () => {
      await put(store, record(1));
      const outcome = await store.withTarget(OTHER_MINION, (unit) => unit.create(record(2, OTHER_MINION, 1)));
      expect(outcome).toEqual({ created: false, reason: 'jid_taken' });
      expect(await store.get(requestId(2))).toBeUndefined();
    });

    it('keeps a JID reserved after its request is settled', async () => {
      await put(store, record(1));
      await store.updateRequest(requestId(1), (r) => step(r, 'reconciled'), { event: 'reconciled', source: 'reconcile' });
      const outcome = await store.withTarget(MINION, (unit) => unit.create(record(2, MINION, 1)));
      expect(outcome).toEqual({ created: false, reason: 'jid_taken' });
    });

    it('returns the stored record when a request id is created twice', async () => {
      await put(store, record(1));
      const outcome = await store.withTarget(MINION, (unit) => unit.create(record(1, MINION, 7)));
      expect(outcome).toEqual({ created: false, reason: 'request_exists', existing: record(1) });
    });

    it('writes the record a unit decides and reports the change', async () => {
      await put(store, record(1));
      const outcome = await store.updateRequest(requestId(1), (r) => step(r, 'intent_recorded'), { event: 'observed', source: 'poller' });
      expect(outcome.changed).toBe(true);
      expect(outcome.before.state).toBe('prepared');
      expect(outcome.after.state).toBe('publishing');
      expect((await store.get(requestId(1)))?.state).toBe('publishing');
    });

    it('writes nothing when a unit returns the record it was given', async () => {
      await put(store, record(1));
      const outcome = await store.updateRequest(requestId(1), (r) => r, { event: 'observed', source: 'poller' });
      expect(outcome.changed).toBe(false);
      expect(await store.get(requestId(1))).toEqual(record(1));
    });

    it('writes nothing when a unit throws', async () => {
      await put(store, record(1));
      await expect(
        store.updateRequest(requestId(1), () => {
          throw new Error('decided against it');
        }, { event: 'observed', source: 'poller' }),
      ).rejects.toThrow('decided against it');
      expect(await store.get(requestId(1))).toEqual(record(1));
    });

    it('refuses to update a request it does not hold', async () => {
      expect(await codeOf(store.updateRequest(requestId(9), (r) => r, { event: 'observed', source: 'poller' }))).toBe('not_found');
    });

    it('refuses an update that changes the identity of a record', async () => {
      await put(store, record(1));
      const code = await codeOf(store.updateRequest(requestId(1), (r) => ({ ...(r as ProtocolRequestRecord), jid: jid(99) }), { event: 'observed', source: 'poller' }));
      expect(code).toBe('internal');
      expect(await store.get(requestId(1))).toEqual(record(1));
    });

    it('reports unresolved records of a target as blockers, and only of that target', async () => {
      await put(store, record(1));
      expect((await store.withTarget(MINION, (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(1)]);
      expect(await store.withTarget(OTHER_MINION, (u) => u.blockers())).toEqual([]);
    });

    it('stops reporting a blocker once its request is terminal or reconciled', async () => {
      await put(store, record(1));
      await put(store, record(2, OTHER_MINION));
      await store.updateRequest(requestId(1), (r) => step(r, 'intent_recorded', 'publish_acked', 'observed'), { event: 'observed', source: 'poller' });
      await store.updateRequest(requestId(2), (r) => step(r, 'intent_recorded', 'reconciled'), { event: 'observed', source: 'poller' });
      expect(await store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
      expect(await store.withTarget(OTHER_MINION, (u) => u.blockers())).toEqual([]);
      expect(await store.blockersOf(MINION)).toEqual([]);
      expect(await store.blockersOf(OTHER_MINION)).toEqual([]);
    });

    it('shows the look without the lock a blocking record another unit created, and only on its target', async () => {
      await put(store, record(1));
      expect(await store.blockersOf(MINION)).toEqual([record(1)]);
      expect(await store.blockersOf(OTHER_MINION)).toEqual([]);
      expect(await codeOf(store.blockersOf('../escape'))).toBe('invalid_input');
    });

    it('answers the look without the lock while another unit holds the target lock', async () => {
      await put(store, record(1));
      let entered!: () => void;
      const inUnit = new Promise<void>((resolve) => {
        entered = resolve;
      });
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let unitOpen = true;
      const unit = store.withTarget(MINION, async (u) => {
        entered();
        await held;
        unitOpen = false;
        return u.blockers();
      });
      await inUnit;
      // Only a fallback so a store that waits for the lock fails here rather than hanging: the look must come back first.
      const fallback = setTimeout(release, 2_000);
      const seen = await store.blockersOf(MINION);
      const answeredWhileHeld = unitOpen;
      release();
      clearTimeout(fallback);
      expect(answeredWhileHeld).toBe(true);
      expect(seen.map((r) => r.request_id)).toEqual([requestId(1)]);
      expect((await unit).map((r) => r.request_id)).toEqual([requestId(1)]);
    });

    it('lists records in request-id order and filters by target, state and resolution', async () => {
      await put(store, record(3));
      await store.updateRequest(requestId(3), (r) => step(r, 'capability_failed'), { event: 'observed', source: 'poller' });
      await put(store, record(1));
      await put(store, record(2, OTHER_MINION));
      expect((await store.list()).map((r) => r.request_id)).toEqual([requestId(1), requestId(2), requestId(3)]);
      expect((await store.list({ minionId: OTHER_MINION })).map((r) => r.request_id)).toEqual([requestId(2)]);
      expect((await store.list({ unresolved: true })).map((r) => r.request_id)).toEqual([requestId(1), requestId(2)]);
      expect((await store.list({ states: ['rejected'] })).map((r) => r.request_id)).toEqual([requestId(3)]);
    });

    it('lists as unresolved exactly the records that block, over many targets, as they settle', async () => {
      const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
      // A target holds at most one blocking record at a time (what dispatch and admission
      // leave; the PostgreSQL store refuses a second by constraint): 1–4 settle before
      // 9–12 are created on their targets.
      const settleFirst: Readonly<Record<number, RequestEvent['type'][]>> = {
        1: ['reconciled'],
        2: ['intent_recorded', 'reconciled'],
        3: ['intent_recorded', 'publish_acked', 'observed'],
        4: ['capability_failed'],
      };
      for (let n = 1; n <= 12; n += 1) {
        await put(store, record(n, minion(n % 8)));
        const events = settleFirst[n];
        if (events !== undefined) await store.updateRequest(requestId(n), (r) => step(r, ...events), { event: 'observed', source: 'poller' });
      }
      await store.updateRequest(requestId(5), (r) => step(r, 'reconciled'), { event: 'reconciled', source: 'reconcile' });
      await store.updateRequest(requestId(9), (r) => step(r, 'intent_recorded'), { event: 'observed', source: 'poller' });
      await store.updateRequest(requestId(10), (r) => step(r, 'intent_recorded', 'publish_acked'), { event: 'observed', source: 'poller' });
      const all = await store.list();
      const blocking = all.filter(isBlocking);
      expect(blocking.map((r) => r.request_id)).toEqual([6, 7, 8, 9, 10, 11, 12].map(requestId));
      expect(await store.list({ unresolved: true })).toEqual(blocking);
      expect((await store.list({ unresolved: true, minionId: minion(1) })).map((r) => r.request_id)).toEqual([requestId(9)]);
      expect((await store.list({ unresolved: true, minionId: minion(5) }))).toEqual([]);
      expect((await store.list({ states: ['publishing', 'published', 'running'] })).map((r) => r.request_id)).toEqual([requestId(9), requestId(10)]);
      expect((await store.list({ states: ['prepared'], minionId: minion(3) })).map((r) => r.request_id)).toEqual([requestId(11)]);
      expect(await store.list({ states: ['prepared'], minionId: minion(1) })).toEqual([]);
      expect((await store.list({ states: ['succeeded', 'reconciled'] })).map((r) => r.request_id)).toEqual([1, 2, 3, 5].map(requestId));
      expect((await store.list({ minionId: minion(4) })).map((r) => r.request_id)).toEqual([requestId(4), requestId(12)]);
    });

    it('finds a record by its JID, and nothing for a JID it does not hold or text that is not a JID', async () => {
      await put(store, record(1));
      await put(store, record(2, OTHER_MINION));
      await store.updateRequest(requestId(2), (r) => step(r, 'intent_recorded', 'publish_acked'), { event: 'observed', source: 'poller' });
      expect(await store.getByJid(jid(1))).toEqual(await store.get(requestId(1)));
      expect(await store.getByJid(jid(2))).toMatchObject({ request_id: requestId(2), minion_id: OTHER_MINION, state: 'published' });
      expect(await store.getByJid(jid(3))).toBeUndefined();
      expect(await store.getByJid('../requests/x')).toBeUndefined();
    });

    it('finds no record by a JID whose create lost to another record of the same request id', async () => {
      await put(store, record(1));
      const outcome = await store.withTarget(OTHER_MINION, (unit) => unit.create(record(1, OTHER_MINION, 7)));
      expect(outcome).toMatchObject({ created: false, reason: 'request_exists' });
      expect(await store.getByJid(jid(7))).toBeUndefined();
      expect(await store.getByJid(jid(1))).toMatchObject({ request_id: requestId(1) });
    });

    it('scans the matching records page by page, each once, whatever the page size', async () => {
      const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
      // Each target's records settle before its next one is created (one blocking record per target at a time).
      const settle: ReadonlyArray<RequestEvent['type'][]> = [['intent_recorded', 'publish_acked', 'observed'], ['reconciled'], ['capability_failed']];
      for (let n = 1; n <= 11; n += 1) {
        await put(store, record(n, minion(n % 3)));
        const events = settle[n % 3] ?? [];
        if (n <= 8) await store.updateRequest(requestId(n), (r) => step(r, ...events), { event: 'observed', source: 'poller' });
      }
      await store.updateRequest(requestId(9), (r) => step(r, 'intent_recorded', 'publish_acked'), { event: 'observed', source: 'poller' });
      const scanned = async (filter: Parameters<RecordStore['scan']>[0], pageSize: number): Promise<string[]> => {
        const ids: string[] = [];
        for await (const page of store.scan(filter, { pageSize })) {
          expect(page.length).toBeGreaterThan(0);
          expect(page.length).toBeLessThanOrEqual(pageSize);
          ids.push(...page.map((r) => r.request_id));
        }
        return ids.sort();
      };
      for (const pageSize of [1, 2, 5, 100]) {
        expect(await scanned({ states: ['succeeded', 'published'] }, pageSize)).toEqual([3, 6, 9].map(requestId).sort());
        expect(await scanned({ unresolved: true }, pageSize)).toEqual([9, 10, 11].map(requestId).sort());
        expect(await scanned({ unresolved: true }, pageSize)).toEqual((await store.list({ unresolved: true })).map((r) => r.request_id).sort());
        expect(await scanned({}, pageSize)).toEqual((await store.list()).map((r) => r.request_id).sort());
        expect(await scanned({ minionId: minion(1) }, pageSize)).toEqual([1, 4, 7, 10].map(requestId).sort());
      }
    });

    it('reports a record as unresolved and as a blocker whenever its stored state blocks, whichever way an update went', async () => {
      await put(store, record(1));
      await store.updateRequest(requestId(1), (r) => step(r, 'capability_failed'), { event: 'observed', source: 'poller' });
      expect(await store.list({ unresolved: true })).toEqual([]);
      // No event of protocol 1 does this (settled states are terminal); the store must not rely on it.
      await store.updateRequest(requestId(1), (r) => ({ ...(r as ProtocolRequestRecord), state: 'unknown', reason: { code: 'unknown', cause: 'status_unknown' } }), { event: 'observed', source: 'poller' });
      expect((await store.list({ unresolved: true })).map((r) => r.request_id)).toEqual([requestId(1)]);
      expect((await store.withTarget(MINION, (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(1)]);
      await store.updateRequest(requestId(1), (r) => step(r, 'reconciled'), { event: 'reconciled', source: 'reconcile' });
      expect(await store.list({ unresolved: true })).toEqual([]);
      expect(await store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
    });

    it('serializes concurrent units on one request so no update is lost', async () => {
      await put(store, record(1));
      const bump = (r: RequestRecord): RequestRecord => ({ ...(r as ProtocolRequestRecord), publish_attempts: (r as ProtocolRequestRecord).publish_attempts + 1 });
      await Promise.all(Array.from({ length: 20 }, () => store.updateRequest(requestId(1), bump, { event: 'observed', source: 'poller' })));
      expect(((await store.get(requestId(1))) as ProtocolRequestRecord).publish_attempts).toBe(20);
    });

    const interruptCreate = (r: ProtocolRequestRecord): Promise<void> => {
      if (subject.interruptCreate === undefined) throw new Error(`store conformance: ${name} provides no interruptCreate and does not say its create is one transaction`);
      return subject.interruptCreate(r);
    };
    // Not registered at all for a store whose create is one transaction: there is no such state to test.
    const interruptible = (title: string, body: () => Promise<void>): void => {
      if (options.createIsOneTransaction !== true) it(title, body);
    };

    interruptible('does not block a target or free the JID after a create interrupted before its record', async () => {
      await interruptCreate(record(1));
      expect(await store.get(requestId(1))).toBeUndefined();
      expect(await store.list()).toEqual([]);
      expect(await store.list({ minionId: MINION })).toEqual([]);
      expect(await store.list({ unresolved: true })).toEqual([]);
      expect(await store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
      // The JID stays reserved, for every target.
      expect(await store.withTarget(MINION, (u) => u.create(record(2, MINION, 1)))).toEqual({ created: false, reason: 'jid_taken' });
      expect(await store.withTarget(OTHER_MINION, (u) => u.create(record(3, OTHER_MINION, 1)))).toEqual({ created: false, reason: 'jid_taken' });
      // The same request can be created again under a new JID, and then it blocks.
      await put(store, record(1, MINION, 5));
      expect(await store.get(requestId(1))).toEqual(record(1, MINION, 5));
      expect((await store.withTarget(MINION, (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(1)]);
      expect((await store.list({ minionId: MINION })).map((r) => r.request_id)).toEqual([requestId(1)]);
    });

    interruptible('does not let an interrupted create of a request id block the target another create bound it to', async () => {
      await interruptCreate(record(1, OTHER_MINION, 1));
      await put(store, record(1, MINION, 2));
      expect(await store.withTarget(OTHER_MINION, (u) => u.blockers())).toEqual([]);
      expect(await store.list({ minionId: OTHER_MINION })).toEqual([]);
      expect((await store.withTarget(MINION, (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(1)]);
    });

    it('reports blockers of many targets, each only its own', async () => {
      const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
      for (let n = 1; n <= 3; n += 1) {
        await put(store, record(n, minion(n % 3)));
        await store.updateRequest(requestId(n), (r) => step(r, n === 2 ? 'capability_failed' : 'reconciled'), { event: 'observed', source: 'poller' });
      }
      for (let n = 4; n <= 6; n += 1) await put(store, record(n, minion(n % 3)));
      expect((await store.withTarget(minion(0), (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(6)]);
      expect((await store.withTarget(minion(1), (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(4)]);
      expect((await store.withTarget(minion(2), (u) => u.blockers())).map((r) => r.request_id)).toEqual([requestId(5)]);
      expect((await store.list({ minionId: minion(2) })).map((r) => r.request_id)).toEqual([requestId(2), requestId(5)]);
    });

    it('lets only one of two concurrent dispatch units to one target create a record', async () => {
      const attempt = (n: number) =>
        store.withTarget(MINION, async (unit) => {
          if ((await unit.blockers()).length > 0) return 'blocked';
          await new Promise((resolve) => setTimeout(resolve, 20));
          return (await unit.create(record(n))).created ? 'created' : 'refused';
        });
      const outcomes = await Promise.all([attempt(1), attempt(2)]);
      expect(outcomes.sort()).toEqual(['blocked', 'created']);
      expect(await store.list()).toHaveLength(1);
    });

    admissionConformanceCases(() => store);
    historyConformanceCases(() => store);
  });
}
