import { MasterRunnerError, type RecordStore } from '@oduflow/master-runner';
import {
  HISTORY_HEAD,
  HISTORY_MAX_ENTRIES,
  HISTORY_TAIL,
  applyEvent,
  createRequestRecord,
  type ProtocolRequestRecord,
  type RecordChange,
  type RequestEvent,
  type RequestRecord,
  type StatusAnswer,
} from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';

/*
 * The store contract's history half (record-store.ts): every committed
 * change of a record adds one entry, in the same unit as the change, and
 * nothing else does; the history is capped. Part of runRecordStoreConformance.
 */

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const T0 = Date.parse('2026-11-29T10:00:00.000Z');

const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const jid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();
const at = (seconds: number): string => new Date(T0 + seconds * 1_000).toISOString();

function record(n: number): ProtocolRequestRecord {
  return createRequestRecord({ request_id: requestId(n), minion_id: MINION, profile: 'configure', state_digest: '', jid: jid(n), at: at(0) });
}

function answer(r: RequestRecord, status: 'running' | 'succeeded' | 'not_started'): StatusAnswer {
  const counts = status === 'succeeded' ? { passed: 2, total: 2 } : { passed: 0, total: 0 };
  return { protocol: 1, minion_id: MINION, request_id: r.request_id, jid: r.jid as string, profile: 'configure', state_digest: '', status, ...counts };
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

export function historyConformanceCases(current: () => RecordStore): void {
  const create = async (r: ProtocolRequestRecord, source: 'admission' | 'dispatch' = 'admission') => {
    const outcome = await current().withTarget(r.minion_id, (unit) => unit.create(r, { source }));
    expect(outcome.created).toBe(true);
  };
  const commit = (n: number, event: (r: RequestRecord) => RequestEvent, source: RecordChange['source']) =>
    current().updateRequest(requestId(n), (r) => applyEvent(r, event(r)), { event: event(record(n)).type, source });

  describe('request history', () => {
    it('has no history for a request it does not hold', async () => {
      expect(await current().history(requestId(1))).toBeUndefined();
      expect(await current().history('not-a-request-id')).toBeUndefined();
    });

    it('records a full lifecycle in order: creation, intent, publication, polls, terminal, each with its time and source', async () => {
      await create(record(1));
      await commit(1, () => ({ type: 'intent_recorded', at: at(1) }), 'relay');
      await commit(1, () => ({ type: 'publish_acked', at: at(2) }), 'relay');
      await commit(1, () => ({ type: 'poll_failed', at: at(3), failure: 'timeout' }), 'poller');
      await commit(1, (r) => ({ type: 'observed', at: at(4), answer: answer(r, 'running') }), 'poller');
      await commit(1, (r) => ({ type: 'observed', at: at(5), answer: answer(r, 'succeeded') }), 'event_stream');
      const history = await current().history(requestId(1));
      expect(history).toEqual({
        dropped: 0,
        entries: [
          { seq: 1, at: at(0), from_state: null, to_state: 'prepared', event: 'created', source: 'admission', observed: null, reason_code: null },
          { seq: 2, at: at(1), from_state: 'prepared', to_state: 'publishing', event: 'intent_recorded', source: 'relay', observed: null, reason_code: null },
          { seq: 3, at: at(2), from_state: 'publishing', to_state: 'published', event: 'publish_acked', source: 'relay', observed: null, reason_code: null },
          { seq: 4, at: at(3), from_state: 'published', to_state: 'published', event: 'poll_failed', source: 'poller', observed: null, reason_code: 'poll_failed' },
          { seq: 5, at: at(4), from_state: 'published', to_state: 'running', event: 'observed', source: 'poller', observed: 'running', reason_code: null },
          { seq: 6, at: at(5), from_state: 'running', to_state: 'succeeded', event: 'observed', source: 'event_stream', observed: 'succeeded', reason_code: null },
        ],
      });
      // The history is kept beside the record, never in it.
      expect(await current().get(requestId(1))).not.toHaveProperty('history');
    });

    it('records a request rejected at creation with its reason code', async () => {
      const rejected = applyEvent(record(2), { type: 'capability_failed', at: at(0), reason: 'capability_missing' }) as ProtocolRequestRecord;
      await create(rejected, 'dispatch');
      expect((await current().history(requestId(2)))?.entries).toEqual([
        { seq: 1, at: at(0), from_state: null, to_state: 'rejected', event: 'created', source: 'dispatch', observed: null, reason_code: 'capability_missing' },
      ]);
    });

    it('keeps an operator reconciliation reason out of the history', async () => {
      await create(record(1));
      await commit(1, () => ({ type: 'reconciled', at: at(1), reason: 'checked the box by hand', actor: 'ops' }), 'reconcile');
      const history = await current().history(requestId(1));
      expect(history?.entries.at(-1)).toMatchObject({ event: 'reconciled', source: 'reconcile', to_state: 'reconciled', at: at(1) });
      expect(JSON.stringify(history)).not.toContain('checked the box');
    });

    it('adds no entry for a unit that changed nothing, one that threw, or one the store refused', async () => {
      await create(record(1));
      const change = { event: 'observed', source: 'poller' } as const;
      await current().updateRequest(requestId(1), (r) => r, change);
      await expect(
        current().updateRequest(requestId(1), () => {
          throw new Error('decided against it');
        }, change),
      ).rejects.toThrow('decided against it');
      expect(await codeOf(current().updateRequest(requestId(1), (r) => ({ ...(r as ProtocolRequestRecord), jid: jid(99) }), change))).toBe('internal');
      // A change that names no event or a source outside the closed set is refused whole: neither the record nor an entry.
      const bad = { event: 'intent_recorded', source: 'somewhere' } as unknown as RecordChange;
      expect(await codeOf(current().updateRequest(requestId(1), (r) => applyEvent(r, { type: 'intent_recorded', at: at(1) }), bad))).toBe('internal');
      expect(await current().get(requestId(1))).toEqual(record(1));
      expect((await current().history(requestId(1)))?.entries.map((e) => e.event)).toEqual(['created']);
    });

    it('adds no entry to a request when a second create of it is refused', async () => {
      await create(record(1));
      const again = await current().withTarget(MINION, (unit) => unit.create(record(1), { source: 'dispatch' }));
      expect(again.created).toBe(false);
      expect((await current().history(requestId(1)))?.entries).toHaveLength(1);
    });

    it('numbers concurrent changes of one request without a gap or a duplicate', async () => {
      await create(record(1));
      await commit(1, () => ({ type: 'intent_recorded', at: at(1) }), 'relay');
      await commit(1, () => ({ type: 'publish_acked', at: at(2) }), 'relay');
      // Each unit returns a new record (a later poll time), so each commits one entry.
      await Promise.all(Array.from({ length: 12 }, (_, i) => commit(1, () => ({ type: 'poll_failed', at: at(3 + i), failure: 'timeout' }), 'poller')));
      const history = await current().history(requestId(1));
      expect(history?.entries.map((e) => e.seq)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    });

    it('caps a flapping request at its first and last entries and counts the ones let go', async () => {
      await create(record(1));
      await commit(1, () => ({ type: 'intent_recorded', at: at(1) }), 'relay');
      await commit(1, () => ({ type: 'publish_acked', at: at(2) }), 'relay');
      const flaps = HISTORY_MAX_ENTRIES + 20;
      for (let i = 0; i < flaps; i += 1) {
        await commit(1, (r) => (i % 2 === 0 ? { type: 'poll_failed', at: at(10 + i), failure: 'timeout' } : { type: 'observed', at: at(10 + i), answer: answer(r, 'not_started') }), 'poller');
      }
      const total = 3 + flaps;
      const history = await current().history(requestId(1));
      expect(history?.entries).toHaveLength(HISTORY_MAX_ENTRIES);
      expect(history?.dropped).toBe(total - HISTORY_MAX_ENTRIES);
      const seqs = history?.entries.map((e) => e.seq) ?? [];
      expect(seqs.slice(0, HISTORY_HEAD)).toEqual(Array.from({ length: HISTORY_HEAD }, (_, i) => i + 1));
      expect(seqs.slice(HISTORY_HEAD)).toEqual(Array.from({ length: HISTORY_TAIL }, (_, i) => total - HISTORY_TAIL + 1 + i));
      expect(history?.entries.slice(0, 3).map((e) => e.event)).toEqual(['created', 'intent_recorded', 'publish_acked']);
      expect(history?.entries.at(-1)?.at).toBe(at(10 + flaps - 1));
    });
  });
}
