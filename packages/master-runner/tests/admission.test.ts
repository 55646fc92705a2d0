import { canonicalJson, type ProtocolRequestRecord } from '@oduflow/protocol';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { admissionKey, admit, type AdmissionScope } from '../src/admission.js';
import type { MasterDeps } from '../src/deps.js';
import { relayOnce } from '../src/outbox-relay.js';
import { reconcile } from '../src/reconcile.js';
import type { RecordStore } from '../src/record-store.js';
import { GOOD_CAPABILITIES, type CallReply } from './support/salt-api-standin.js';
import { MINION, OTHER_MINION, makeWorld, refusal, wrapStore, type World } from './support/harness.js';

/*
 * admit() against the real file store and the salt-api stand-in, which
 * counts every publication per request id and JID.
 */

const START = Date.parse('2026-11-29T10:00:00.000Z');
const SCOPE: AdmissionScope = { tenant: 'acme', actor: 'ci', action: 'request.create', key: 'order-4711' };
const CONFIGURE = { minionId: MINION, profile: 'configure' };

let world: World;
/** Milliseconds added to the stepping clock: a test moves time past a lease with it. */
let skew = 0;
let deps: MasterDeps;
/** The tests' clock: steps a millisecond per reading, plus `skew`. */
let clock: () => Date;

beforeEach(async () => {
  world = await makeWorld();
  skew = 0;
  let step = 0;
  clock = () => new Date(START + skew + step++);
  deps = { ...world.deps, now: clock };
});
afterEach(async () => {
  await world.close();
});

const admitted = (store: RecordStore) => store.claimOutbox({ limit: 100, now: new Date(START + skew + 10_000_000), leaseMs: 1 });

/** A capability answer held until the returned function is called (the first admission waits at its capability call). */
function holdCapabilityOnce(): () => void {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let first = true;
  world.standIn.capabilities = (): CallReply => {
    const ready: CallReply = { retcode: 0, ret: GOOD_CAPABILITIES };
    if (!first) return ready;
    first = false;
    return { after: gate, reply: ready };
  };
  return open;
}

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('admissionKey', () => {
  it('hashes the scoped key and fingerprints the content as lowercase SHA-256 hex, the same every time', () => {
    const key = admissionKey(SCOPE, { minionId: MINION, profile: 'configure', stateDigest: '' });
    expect(key).toEqual(admissionKey({ ...SCOPE }, { minionId: MINION, profile: 'configure', stateDigest: '' }));
    expect(key.keyHash).toMatch(/^[0-9a-f]{64}$/);
    expect(key.fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(key).toMatchObject({ tenant: 'acme', actor: 'ci' });
  });

  it('gives another key for another tenant, actor, action or key, and another fingerprint for other content only', () => {
    const content = { minionId: MINION, profile: 'configure' as const, stateDigest: '' };
    const base = admissionKey(SCOPE, content);
    for (const field of ['tenant', 'actor', 'action', 'key'] as const) {
      const other = admissionKey({ ...SCOPE, [field]: `${SCOPE[field]}x` }, content);
      expect(other.keyHash).not.toBe(base.keyHash);
      expect(other.fingerprint).toBe(base.fingerprint);
    }
    expect(admissionKey(SCOPE, { ...content, minionId: OTHER_MINION }).fingerprint).not.toBe(base.fingerprint);
    expect(admissionKey(SCOPE, { ...content, profile: 'production' }).fingerprint).not.toBe(base.fingerprint);
    expect(admissionKey(SCOPE, { ...content, profile: 'custom', stateDigest: 'a'.repeat(64) }).keyHash).toBe(base.keyHash);
  });

  it('refuses an empty key, one over 255 characters and control characters in any part of the scope', () => {
    const content = { minionId: MINION, profile: 'configure' as const, stateDigest: '' };
    for (const scope of [{ ...SCOPE, key: '' }, { ...SCOPE, key: 'k'.repeat(256) }, { ...SCOPE, tenant: 'a\nb' }, { ...SCOPE, actor: '' }, { ...SCOPE, action: 'x\u0000' }]) {
      expect(() => admissionKey(scope, content)).toThrow(expect.objectContaining({ code: 'invalid_input', detail: 'invalid_admission_key' }));
    }
    expect(admissionKey({ ...SCOPE, key: 'k'.repeat(255) }, content).keyHash).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('admit', () => {
  it('records the request prepared with a JID and enqueues it, publishing nothing itself', async () => {
    const result = await admit(deps, CONFIGURE, { scope: SCOPE });
    expect(result.outcome).toBe('admitted');
    const record = (result as { record: ProtocolRequestRecord }).record;
    expect(record).toMatchObject({ state: 'prepared', minion_id: MINION, profile: 'configure', publish_attempts: 0 });
    expect(record.jid).toMatch(/^20261129100000\d{6}$/);
    expect(await world.store.get(record.request_id)).toEqual(record);
    expect(world.standIn.publications).toEqual([]);
    expect(await admitted(world.store)).toEqual([{ requestId: record.request_id, stateDataJson: '', enqueuedAt: record.created_at, attempts: 1 }]);
  });

  it('answers the same key with the same content with the same request, never a second one, before and after publication', async () => {
    const first = await admit(deps, CONFIGURE, { scope: SCOPE });
    const again = await admit(deps, CONFIGURE, { scope: SCOPE });
    expect(again).toEqual({ outcome: 'replayed', record: first.outcome === 'admitted' ? first.record : undefined });
    await relayOnce(deps);
    const later = await admit(deps, CONFIGURE, { scope: SCOPE });
    expect(later).toMatchObject({ outcome: 'replayed', record: { request_id: (again as { record: { request_id: string } }).record.request_id, state: 'published' } });
    expect(await world.store.list()).toHaveLength(1);
    expect(world.standIn.publications).toHaveLength(1);
  });

  it('refuses the same key with other content as a mismatch, recording nothing', async () => {
    await admit(deps, CONFIGURE, { scope: SCOPE });
    expect(await admit(deps, { minionId: MINION, profile: 'production' }, { scope: SCOPE })).toEqual({ outcome: 'key_mismatch' });
    expect(await admit(deps, { minionId: OTHER_MINION, profile: 'configure' }, { scope: SCOPE })).toEqual({ outcome: 'key_mismatch' });
    expect(await world.store.list()).toHaveLength(1);
  });

  it('keeps keys of other tenants and actors apart: the same key text is another key', async () => {
    await admit(deps, CONFIGURE, { scope: SCOPE });
    const other = await admit(deps, { minionId: OTHER_MINION, profile: 'configure' }, { scope: { ...SCOPE, tenant: 'globex' } });
    expect(other.outcome).toBe('admitted');
    expect(await world.store.list()).toHaveLength(2);
  });

  it('admits one of two racing admissions of one key and tells the other it is in flight', async () => {
    const release = holdCapabilityOnce();
    const first = admit(deps, CONFIGURE, { scope: SCOPE });
    await until(() => world.standIn.calls.some((c) => c.fun === 'oduflow_job.capabilities'));
    expect(await admit(world.anotherWorker(), CONFIGURE, { scope: SCOPE })).toEqual({ outcome: 'key_in_flight' });
    release();
    expect((await first).outcome).toBe('admitted');
    expect(await world.store.list()).toHaveLength(1);
    expect(await admit(deps, CONFIGURE, { scope: SCOPE })).toMatchObject({ outcome: 'replayed' });
  });

  it('lets a later admission take over a claim whose lease lapsed; the first then stores nothing and is told the key is in flight', async () => {
    const release = holdCapabilityOnce();
    const first = admit(deps, CONFIGURE, { scope: SCOPE, leaseMs: 60_000 });
    await until(() => world.standIn.calls.some((c) => c.fun === 'oduflow_job.capabilities'));
    skew = 60_001;
    // A lapsed claim with nothing stored is a free key: other content may take it.
    const otherContent = { minionId: OTHER_MINION, profile: 'configure' };
    const second = await admit({ ...world.anotherWorker(), now: clock }, otherContent, { scope: SCOPE, leaseMs: 60_000 });
    expect(second.outcome).toBe('admitted');
    release();
    expect(await first).toEqual({ outcome: 'key_in_flight' });
    const records = await world.store.list();
    expect(records.map((r) => r.request_id)).toEqual([(second as { record: ProtocolRequestRecord }).record.request_id]);
    expect(await world.store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
    expect(await admit(deps, otherContent, { scope: SCOPE })).toEqual({ outcome: 'replayed', record: records[0] });
    expect(await admit(deps, CONFIGURE, { scope: SCOPE })).toEqual({ outcome: 'key_mismatch' });
  });

  it('refuses the admission whose claim lapsed as target_blocked when the one that took its key over admitted the same content', async () => {
    const release = holdCapabilityOnce();
    const first = admit(deps, CONFIGURE, { scope: SCOPE, leaseMs: 60_000 });
    await until(() => world.standIn.calls.some((c) => c.fun === 'oduflow_job.capabilities'));
    skew = 60_001;
    const second = await admit({ ...world.anotherWorker(), now: clock }, CONFIGURE, { scope: SCOPE, leaseMs: 60_000 });
    const winner = (second as { record: ProtocolRequestRecord }).record;
    release();
    // Under the target lock the blockers come first (the spec's order): the winner blocks the target.
    expect(await refusal(first)).toMatchObject({ code: 'target_blocked', requestId: winner.request_id });
    expect(await world.store.list()).toEqual([winner]);
    expect(await admit(deps, CONFIGURE, { scope: SCOPE })).toEqual({ outcome: 'replayed', record: winner });
  });

  it('records nothing for an unreachable minion or one without a key, and frees the key for a retry', async () => {
    world.standIn.capabilities = () => ({ noReturn: true });
    expect(await refusal(admit(deps, CONFIGURE, { scope: SCOPE }))).toMatchObject({ code: 'minion_unreachable', detail: 'no_return' });
    world.standIn.capabilities = () => ({ noTarget: true });
    expect(await refusal(admit(deps, CONFIGURE, { scope: SCOPE }))).toMatchObject({ code: 'no_target' });
    expect(await world.store.list()).toEqual([]);
    expect(await admitted(world.store)).toEqual([]);
    // The same key with other content is no mismatch: the key was released, not bound.
    world.standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
    expect((await admit(deps, { minionId: MINION, profile: 'production' }, { scope: SCOPE })).outcome).toBe('admitted');
  });

  it('refuses a blocked target, records nothing and frees the key', async () => {
    const blocker = await admit(deps, CONFIGURE, { scope: { ...SCOPE, key: 'earlier' } });
    const refused = await refusal(admit(deps, { minionId: MINION, profile: 'production' }, { scope: SCOPE }));
    expect(refused).toMatchObject({ code: 'target_blocked', requestId: (blocker as { record: ProtocolRequestRecord }).record.request_id, detail: 'prepared' });
    expect(await world.store.list()).toHaveLength(1);
    await reconcile(deps, (blocker as { record: ProtocolRequestRecord }).record.request_id, { reason: 'cancelled before publication', actor: 'ops' });
    expect((await admit(deps, { minionId: MINION, profile: 'production' }, { scope: SCOPE })).outcome).toBe('admitted');
  });

  it('records a minion that answers not ready as rejected, binds the key to it, enqueues nothing and leaves the target free', async () => {
    world.standIn.capabilities = () => ({ retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['store_unsafe'] } });
    const result = await admit(deps, CONFIGURE, { scope: SCOPE });
    expect(result).toMatchObject({ outcome: 'rejected', rejection: { code: 'not_ready', readiness: ['store_unsafe'] }, record: { state: 'rejected' } });
    expect(await admit(deps, CONFIGURE, { scope: SCOPE })).toEqual({ outcome: 'replayed', record: (result as { record: unknown }).record });
    expect(await admitted(world.store)).toEqual([]);
    world.standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
    expect((await admit(deps, CONFIGURE, { scope: { ...SCOPE, key: 'next' } })).outcome).toBe('admitted');
    expect(world.standIn.publications).toEqual([]);
  });

  it('carries custom high data byte-exact to Salt through the outbox, keeps it private meanwhile and removes it once published', async () => {
    const text = canonicalJson({ motd: { 'file.managed': [{ name: '/etc/motd' }, { contents: 'secret-looking-text ünïcødé 🙂' }] } });
    const result = await admit(deps, { minionId: MINION, profile: 'custom', stateDataJson: text }, { scope: SCOPE });
    const record = (result as { record: ProtocolRequestRecord }).record;
    const entryFile = join(world.storeRoot, 'outbox', `${record.request_id}.json`);
    expect(statSync(entryFile).mode & 0o777).toBe(0o600);
    expect(JSON.stringify(await world.store.get(record.request_id))).not.toContain('secret-looking-text');
    expect(readdirSync(join(world.storeRoot, 'keys')).map((name) => readFileSync(join(world.storeRoot, 'keys', name), 'utf8')).join('')).not.toContain('order-4711');

    expect((await relayOnce(deps)).map((r) => r.outcome)).toEqual(['published']);
    expect(world.standIn.publications).toEqual([{ minionId: MINION, jid: record.jid, fun: 'oduflow_job.run', args: [record.request_id, 'custom', text] }]);
    expect(readdirSync(join(world.storeRoot, 'outbox'))).toEqual([]);
    expect(await world.store.get(record.request_id)).toMatchObject({ state: 'published' });
  });

  it('refuses invalid input and a caller-chosen request id before touching the store', async () => {
    let storeCalls = 0;
    const counted = wrapStore(world.store, {
      claimKey: (key, options) => {
        storeCalls += 1;
        return world.store.claimKey(key, options);
      },
      get: (id) => {
        storeCalls += 1;
        return world.store.get(id);
      },
    });
    const d = { ...deps, store: counted };
    expect(await refusal(admit(d, { minionId: 'client-not-a-uuid', profile: 'configure' }, { scope: SCOPE }))).toMatchObject({ code: 'invalid_input', detail: 'invalid_minion_id' });
    expect(await refusal(admit(d, { minionId: MINION, profile: 'custom', stateDataJson: '{"a": 1}' }, { scope: SCOPE }))).toMatchObject({ code: 'invalid_input' });
    expect(await refusal(admit(d, { ...CONFIGURE, requestId: '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f' }, { scope: SCOPE }))).toMatchObject({
      code: 'invalid_input',
      detail: 'request_id_not_accepted',
    });
    expect(await refusal(admit(d, CONFIGURE, { scope: { ...SCOPE, key: '' } }))).toMatchObject({ code: 'invalid_input', detail: 'invalid_admission_key' });
    expect(await refusal(admit(d, CONFIGURE, { scope: SCOPE, leaseMs: 0 }))).toMatchObject({ code: 'config_invalid' });
    expect(storeCalls).toBe(0);
    expect(world.standIn.calls).toEqual([]);
  });

  it('gives every admission its own random request id', async () => {
    const a = await admit(world.deps, CONFIGURE, { scope: SCOPE });
    const b = await admit(world.deps, { minionId: OTHER_MINION, profile: 'configure' }, { scope: { ...SCOPE, key: 'other' } });
    const ids = [a, b].map((r) => (r as { record: ProtocolRequestRecord }).record.request_id);
    expect(new Set(ids).size).toBe(2);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
