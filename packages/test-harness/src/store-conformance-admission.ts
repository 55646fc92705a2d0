import { admissionKey, type AdmissionKey, type CreateOptions, type RecordStore } from '@oduflow/master-runner';
import { applyEvent, canonicalJson, createRequestRecord, stateDigest, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';

/*
 * The store contract's admission half (record-store.ts): Idempotency-Key
 * claims and bindings, the outbox, paged and multi-target listing and the
 * unresolved counts. Part of runRecordStoreConformance: every store passes
 * the same cases, through the RecordStore interface only.
 */

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const OTHER_MINION = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
const T0 = Date.parse('2026-11-29T10:00:00.000Z');
const LEASE = 60_000;

const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const jid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();
const at = (ms: number): Date => new Date(T0 + ms);

/** A prepared record created `seconds` after T0 (its created_at is what an outbox entry and a key binding are dated by). */
function record(n: number, options: { minionId?: string; jidNumber?: number; seconds?: number; text?: string } = {}): ProtocolRequestRecord {
  return createRequestRecord({
    request_id: requestId(n),
    minion_id: options.minionId ?? MINION,
    profile: options.text === undefined ? 'configure' : 'custom',
    state_digest: options.text === undefined ? '' : stateDigest(options.text),
    jid: jid(options.jidNumber ?? n),
    at: at((options.seconds ?? 0) * 1_000).toISOString(),
  });
}

function key(name: string, content: { minionId?: string; profile?: 'configure' | 'production' } = {}): AdmissionKey {
  return admissionKey(
    { tenant: 'acme', actor: 'ci', action: 'request.create', key: name },
    { minionId: content.minionId ?? MINION, profile: content.profile ?? 'configure', stateDigest: '' },
  );
}

const claim = (store: RecordStore, k: AdmissionKey, n: number, ms = 0) => store.claimKey(k, { requestId: requestId(n), now: at(ms), leaseMs: LEASE });

function settle(r: RequestRecord, how: 'reconciled' | 'rejected' | 'publishing' | 'published'): RequestRecord {
  const when = at(1_000).toISOString();
  if (how === 'reconciled') return applyEvent(r, { type: 'reconciled', at: when, reason: 'checked', actor: 'ops' });
  if (how === 'rejected') return applyEvent(r, { type: 'capability_failed', at: when, reason: 'capability_missing' });
  const publishing = applyEvent(r, { type: 'intent_recorded', at: when });
  return how === 'publishing' ? publishing : applyEvent(publishing, { type: 'publish_acked', at: when });
}

const ids = (records: readonly RequestRecord[]): string[] => records.map((r) => r.request_id);

export function admissionConformanceCases(current: () => RecordStore): void {
  const create = (r: ProtocolRequestRecord, options?: CreateOptions) => current().withTarget(r.minion_id, (unit) => unit.create(r, options));

  describe('Idempotency-Key claims', () => {
    it('claims a free key under the request id it is given', async () => {
      expect(await claim(current(), key('a'), 1)).toEqual({ kind: 'claimed', requestId: requestId(1) });
    });

    it('answers a live claim as in flight for the same content and as a mismatch for other content', async () => {
      await claim(current(), key('a'), 1);
      expect(await claim(current(), key('a'), 2, LEASE - 1)).toEqual({ kind: 'in_flight' });
      expect(await claim(current(), key('a', { profile: 'production' }), 2, LEASE - 1)).toEqual({ kind: 'mismatch' });
    });

    it('renews a claim when the same request claims it again', async () => {
      await claim(current(), key('a'), 1);
      expect(await claim(current(), key('a'), 1, LEASE - 1)).toEqual({ kind: 'claimed', requestId: requestId(1) });
      expect(await claim(current(), key('a'), 2, 2 * LEASE - 2)).toEqual({ kind: 'in_flight' });
    });

    it('treats a claim whose lease lapsed with nothing stored as a free key, for any content', async () => {
      await claim(current(), key('a'), 1);
      expect(await claim(current(), key('a', { profile: 'production' }), 2, LEASE)).toEqual({ kind: 'claimed', requestId: requestId(2) });
    });

    it('keeps different keys and scopes apart', async () => {
      await claim(current(), key('a'), 1);
      expect(await claim(current(), key('b'), 2)).toEqual({ kind: 'claimed', requestId: requestId(2) });
      const otherTenant = admissionKey({ tenant: 'globex', actor: 'ci', action: 'request.create', key: 'a' }, { minionId: MINION, profile: 'configure', stateDigest: '' });
      expect(await current().claimKey(otherTenant, { requestId: requestId(3), now: at(0), leaseMs: LEASE })).toEqual({ kind: 'claimed', requestId: requestId(3) });
    });

    it('grants exactly one of several concurrent claims of one key', async () => {
      const outcomes = await Promise.all([1, 2, 3, 4, 5, 6].map((n) => claim(current(), key('a'), n)));
      expect(outcomes.filter((o) => o.kind === 'claimed')).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'in_flight')).toHaveLength(5);
    });

    it('refuses a malformed key hash or fingerprint as invalid input', async () => {
      const bad = { ...key('a'), keyHash: '../../etc/passwd' };
      await expect(current().claimKey(bad, { requestId: requestId(1), now: at(0), leaseMs: LEASE })).rejects.toMatchObject({ code: 'invalid_input' });
      await expect(current().claimKey({ ...key('a'), fingerprint: 'ABC' }, { requestId: requestId(1), now: at(0), leaseMs: LEASE })).rejects.toMatchObject({ code: 'invalid_input' });
    });
  });

  describe('creating under a key', () => {
    it('binds the key to the record: the same content replays it and other content is a mismatch, whatever the request id and however late', async () => {
      await claim(current(), key('a'), 1);
      expect(await create(record(1), { key: key('a') })).toEqual({ created: true, record: record(1) });
      const aYearOn = 365 * 24 * 3_600_000;
      expect(await claim(current(), key('a'), 2, aYearOn)).toEqual({ kind: 'admitted', requestId: requestId(1) });
      expect(await claim(current(), key('a'), 1, 1)).toEqual({ kind: 'admitted', requestId: requestId(1) });
      expect(await claim(current(), key('a', { profile: 'production' }), 2, aYearOn)).toEqual({ kind: 'mismatch' });
    });

    it('stores nothing when the claim lapsed and another request took the key: claim_lost', async () => {
      await claim(current(), key('a'), 1);
      await claim(current(), key('a'), 2, LEASE);
      expect(await create(record(1), { key: key('a'), outbox: { stateDataJson: '' } })).toEqual({ created: false, reason: 'claim_lost' });
      expect(await current().get(requestId(1))).toBeUndefined();
      expect(await current().withTarget(MINION, (u) => u.blockers())).toEqual([]);
      expect(await current().claimOutbox({ limit: 10, now: at(LEASE), leaseMs: LEASE })).toEqual([]);
      expect(await claim(current(), key('a'), 3, LEASE + 1)).toEqual({ kind: 'in_flight' });
      // The JID was not reserved by a create that stored nothing.
      expect(await create(record(4, { jidNumber: 1 }))).toMatchObject({ created: true });
    });

    it('stores nothing for a key that was never claimed, or claimed under another request id: claim_lost', async () => {
      expect(await create(record(1), { key: key('a') })).toEqual({ created: false, reason: 'claim_lost' });
      await claim(current(), key('b'), 2);
      expect(await create(record(1), { key: key('b') })).toEqual({ created: false, reason: 'claim_lost' });
      expect(await current().list()).toEqual([]);
    });

    it('still creates under a claim that lapsed when nobody took the key', async () => {
      await claim(current(), key('a'), 1);
      expect(await create(record(1, { seconds: 120 }), { key: key('a') })).toMatchObject({ created: true });
      expect(await claim(current(), key('a'), 2, 10 * LEASE)).toEqual({ kind: 'admitted', requestId: requestId(1) });
    });

    it('keeps the claim when the JID is taken, so the next JID binds it', async () => {
      await create(record(9, { minionId: OTHER_MINION, jidNumber: 1 }));
      await claim(current(), key('a'), 1);
      expect(await create(record(1), { key: key('a'), outbox: { stateDataJson: '' } })).toEqual({ created: false, reason: 'jid_taken' });
      expect(await claim(current(), key('a'), 2, 1)).toEqual({ kind: 'in_flight' });
      expect(await create(record(1, { jidNumber: 2 }), { key: key('a'), outbox: { stateDataJson: '' } })).toMatchObject({ created: true });
      expect(await claim(current(), key('a'), 2, 1)).toEqual({ kind: 'admitted', requestId: requestId(1) });
      expect(ids(await current().list())).toEqual([requestId(1), requestId(9)]);
      expect((await current().claimOutbox({ limit: 10, now: at(0), leaseMs: LEASE })).map((e) => e.requestId)).toEqual([requestId(1)]);
    });

    it('binds a rejected record without an outbox entry', async () => {
      await claim(current(), key('a'), 1);
      const rejected = applyEvent(record(1), { type: 'capability_failed', at: record(1).created_at, reason: 'capability_missing' }) as ProtocolRequestRecord;
      expect(await create(rejected, { key: key('a') })).toMatchObject({ created: true });
      expect(await claim(current(), key('a'), 2, 1)).toEqual({ kind: 'admitted', requestId: requestId(1) });
      expect(await current().claimOutbox({ limit: 10, now: at(0), leaseMs: LEASE })).toEqual([]);
      expect(await current().withTarget(MINION, (u) => u.blockers())).toEqual([]);
    });
  });

  describe('releasing and expiring keys', () => {
    it('releases only its own live claim, and never a bound key', async () => {
      await claim(current(), key('a'), 1);
      await current().releaseKey(key('a'), requestId(2));
      expect(await claim(current(), key('a'), 3, 1)).toEqual({ kind: 'in_flight' });
      await current().releaseKey(key('a'), requestId(1));
      expect(await claim(current(), key('a', { profile: 'production' }), 3, 1)).toEqual({ kind: 'claimed', requestId: requestId(3) });

      await claim(current(), key('b'), 4);
      await create(record(4), { key: key('b') });
      await current().releaseKey(key('b'), requestId(4));
      expect(await claim(current(), key('b'), 5, 1)).toEqual({ kind: 'admitted', requestId: requestId(4) });
      await current().releaseKey(key('never-claimed'), requestId(6));
    });

    it('forgets keys bound before the cutoff (at their record\'s created_at) and claims lapsed before it, keeping the rest and every request', async () => {
      await claim(current(), key('bound-early'), 1);
      await create(record(1, { seconds: 0 }), { key: key('bound-early') });
      await claim(current(), key('bound-late', { minionId: OTHER_MINION }), 2);
      await create(record(2, { minionId: OTHER_MINION, seconds: 100 }), { key: key('bound-late', { minionId: OTHER_MINION }) });
      await claim(current(), key('lapsed'), 3, 0); // lease ends at T0 + 60 s
      await claim(current(), key('live'), 4, 90_000); // lease ends at T0 + 150 s

      expect(await current().expireKeys(at(0))).toBe(0);
      expect(await current().expireKeys(at(60_001))).toBe(2); // bound-early (bound at T0) and lapsed (ended at T0 + 60 s)
      expect(await current().expireKeys(at(60_001))).toBe(0);
      expect(await claim(current(), key('bound-early', { profile: 'production' }), 5, 60_001)).toEqual({ kind: 'claimed', requestId: requestId(5) });
      expect(await claim(current(), key('bound-late', { minionId: OTHER_MINION }), 6, 60_001)).toEqual({ kind: 'admitted', requestId: requestId(2) });
      expect(await claim(current(), key('live'), 7, 60_001)).toEqual({ kind: 'in_flight' });
      expect(ids(await current().list())).toEqual([requestId(1), requestId(2)]);
    });
  });

  describe('the outbox', () => {
    const claimAt = (ms: number, limit = 10) => current().claimOutbox({ limit, now: at(ms), leaseMs: LEASE });

    it('enqueues with the create and hands entries out oldest first, at most the limit, each once per lease, state data byte-exact', async () => {
      const text = canonicalJson({ motd: { 'file.managed': [{ name: '/etc/motd' }, { contents: 'ünïcødé 🙂 "quoted"\n' }] } });
      await create(record(1, { minionId: minion(1), seconds: 30 }), { outbox: { stateDataJson: '' } });
      await create(record(2, { minionId: minion(2), seconds: 10, text }), { outbox: { stateDataJson: text } });
      await create(record(3, { minionId: minion(3), seconds: 20 }), { outbox: { stateDataJson: '' } });
      await create(record(4, { minionId: minion(4), seconds: 5 })); // no outbox entry

      const first = await claimAt(60_000, 2);
      expect(first).toEqual([
        { requestId: requestId(2), stateDataJson: text, enqueuedAt: at(10_000).toISOString(), attempts: 1 },
        { requestId: requestId(3), stateDataJson: '', enqueuedAt: at(20_000).toISOString(), attempts: 1 },
      ]);
      expect((await claimAt(60_000)).map((e) => e.requestId)).toEqual([requestId(1)]);
      expect(await claimAt(60_000 + LEASE - 1)).toEqual([]);
      expect((await claimAt(60_000 + LEASE)).map((e) => [e.requestId, e.attempts])).toEqual([
        [requestId(2), 2],
        [requestId(3), 2],
        [requestId(1), 2],
      ]);
    });

    it('defers an entry until the given instant, dropping its claim', async () => {
      await create(record(1), { outbox: { stateDataJson: '' } });
      await claimAt(0);
      await current().deferOutbox(requestId(1), at(5_000));
      expect(await claimAt(4_999)).toEqual([]);
      expect((await claimAt(5_000)).map((e) => e.requestId)).toEqual([requestId(1)]);
      await current().deferOutbox(requestId(9), at(0)); // absent: nothing happens
    });

    it('removes an entry for good, and removing an absent one is fine', async () => {
      await create(record(1), { outbox: { stateDataJson: '' } });
      await current().removeOutbox(requestId(1));
      await current().removeOutbox(requestId(1));
      await current().removeOutbox(requestId(9));
      expect(await claimAt(10 * LEASE)).toEqual([]);
      expect(await current().get(requestId(1))).toEqual(record(1));
    });

    it('enqueues nothing for a create that was refused', async () => {
      await create(record(1), { outbox: { stateDataJson: '' } });
      await current().removeOutbox(requestId(1));
      expect(await create(record(2, { minionId: OTHER_MINION, jidNumber: 1 }), { outbox: { stateDataJson: '' } })).toEqual({ created: false, reason: 'jid_taken' });
      expect(await create(record(1, { jidNumber: 3 }), { outbox: { stateDataJson: '' } })).toMatchObject({ created: false, reason: 'request_exists' });
      expect(await claimAt(0)).toEqual([]);
    });

    it('never hands one entry to two concurrent claims', async () => {
      for (let n = 1; n <= 6; n += 1) await create(record(n, { minionId: minion(n) }), { outbox: { stateDataJson: '' } });
      const [a, b, c] = await Promise.all([claimAt(0, 3), claimAt(0, 3), claimAt(0, 3)]);
      const handed = [...a, ...b, ...c].map((e) => e.requestId);
      expect(handed.sort()).toEqual([1, 2, 3, 4, 5, 6].map(requestId));
    });
  });

  describe('paged and multi-target listing, unresolved counts', () => {
    it('pages through records in request-id order with after and limit, under every filter', async () => {
      // A target holds one blocking record at a time (the PostgreSQL store refuses a second): 1–6 settle as they come.
      for (let n = 1; n <= 9; n += 1) {
        await create(record(n, { minionId: minion(n % 3) }));
        if (n <= 6) await current().updateRequest(requestId(n), (r) => settle(r, n % 2 === 0 ? 'reconciled' : 'rejected'), { event: 'observed', source: 'poller' });
      }
      for (const filter of [{}, { unresolved: true }, { minionId: minion(1) }, { states: ['prepared' as const] }, { states: ['reconciled' as const, 'prepared' as const] }]) {
        const all = await current().list(filter);
        const paged: RequestRecord[] = [];
        let after: string | undefined;
        for (;;) {
          const page = await current().list(filter, after === undefined ? { limit: 2 } : { after, limit: 2 });
          expect(page.length).toBeLessThanOrEqual(2);
          if (page.length === 0) break;
          paged.push(...page);
          after = page[page.length - 1]?.request_id;
        }
        expect(paged).toEqual(all);
      }
      expect(ids(await current().list({}, { after: requestId(7) }))).toEqual([requestId(8), requestId(9)]);
      expect(ids(await current().list({}, { limit: 3 }))).toEqual([1, 2, 3].map(requestId));
    });

    it('refuses a page limit that is not a positive whole number', async () => {
      await expect(current().list({}, { limit: 0 })).rejects.toMatchObject({ code: 'invalid_input' });
      await expect(current().list({}, { limit: 1.5 })).rejects.toMatchObject({ code: 'invalid_input' });
    });

    it('lists the records of several targets with minionIds, alone or with the other filters', async () => {
      // One blocking record per target at a time: 1–4 settle as they come, 5 later.
      for (let n = 1; n <= 8; n += 1) {
        await create(record(n, { minionId: minion(n % 4) }));
        if (n <= 4) await current().updateRequest(requestId(n), (r) => settle(r, n % 2 === 0 ? 'rejected' : 'reconciled'), { event: 'observed', source: 'poller' });
      }
      await current().updateRequest(requestId(5), (r) => settle(r, 'reconciled'), { event: 'reconciled', source: 'reconcile' });
      expect(ids(await current().list({ minionIds: [minion(1), minion(2)] }))).toEqual([1, 2, 5, 6].map(requestId));
      expect(ids(await current().list({ minionIds: [minion(1), minion(2)], unresolved: true }))).toEqual([requestId(6)]);
      expect(ids(await current().list({ minionIds: [minion(1)], states: ['reconciled'] }))).toEqual([1, 5].map(requestId));
      expect(ids(await current().list({ minionIds: [minion(1), minion(2)], states: ['rejected'] }))).toEqual([requestId(2)]);
      expect(ids(await current().list({ minionIds: [minion(1), minion(2)], minionId: minion(2) }))).toEqual([2, 6].map(requestId));
      expect(ids(await current().list({ minionIds: [minion(1)], minionId: minion(2) }))).toEqual([]);
      expect(await current().list({ minionIds: [] })).toEqual([]);
      expect(ids(await current().list({ minionIds: [minion(1), minion(2)] }, { after: requestId(2), limit: 1 }))).toEqual([requestId(5)]);
      const scanned: string[] = [];
      for await (const page of current().scan({ minionIds: [minion(3), minion(0)] }, { pageSize: 1 })) scanned.push(...ids(page));
      expect(scanned.sort()).toEqual([3, 4, 7, 8].map(requestId));
    });

    it('counts the records that block their target, by state', async () => {
      expect(await current().countUnresolved()).toEqual({});
      for (let n = 1; n <= 6; n += 1) await create(record(n, { minionId: minion(n) }));
      await current().updateRequest(requestId(1), (r) => settle(r, 'publishing'), { event: 'observed', source: 'poller' });
      await current().updateRequest(requestId(2), (r) => settle(r, 'published'), { event: 'observed', source: 'poller' });
      await current().updateRequest(requestId(3), (r) => settle(r, 'published'), { event: 'observed', source: 'poller' });
      await current().updateRequest(requestId(4), (r) => settle(r, 'reconciled'), { event: 'reconciled', source: 'reconcile' });
      expect(await current().countUnresolved()).toEqual({ prepared: 2, publishing: 1, published: 2 });
    });
  });
}
