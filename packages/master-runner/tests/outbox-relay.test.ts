import type { ProtocolRequestRecord, RequestRecord } from '@oduflow/protocol';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { admit, type AdmissionScope } from '../src/admission.js';
import type { MasterDeps } from '../src/deps.js';
import { relayOnce, startOutboxRelay } from '../src/outbox-relay.js';
import { reconcile } from '../src/reconcile.js';
import { createSaltApiClient } from '../src/salt-api-client.js';
import { GOOD_CAPABILITIES, refusedUrl } from './support/salt-api-standin.js';
import { MINION, makeWorld, wrapStore, type World } from './support/harness.js';
import { startRelayJob } from './support/store-process.js';

/*
 * The outbox relay against the real file store and the salt-api stand-in,
 * which counts every publication per request id and JID: the assertions
 * that matter are those counts.
 */

const START = Date.parse('2026-11-29T10:00:00.000Z');
const scope = (key: string): AdmissionScope => ({ tenant: 'acme', actor: 'ci', action: 'request.create', key });
const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;

let world: World;
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

async function admitOne(minionId = MINION, key = 'k-1'): Promise<ProtocolRequestRecord> {
  const result = await admit(deps, { minionId, profile: 'configure' }, { scope: scope(key) });
  if (result.outcome !== 'admitted') throw new Error(`not admitted: ${result.outcome}`);
  return result.record;
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const outboxFiles = (): string[] => readdirSync(join(world.storeRoot, 'outbox'));

describe('relayOnce', () => {
  it('publishes an admitted request once under its JID, removes its entry and reports it', async () => {
    const record = await admitOne();
    const published: RequestRecord[] = [];
    const outcomes: string[] = [];
    const results = await relayOnce(deps, { onPublished: (r) => published.push(r), metrics: { onPublication: (o) => outcomes.push(o) } });
    expect(results).toMatchObject([{ requestId: record.request_id, outcome: 'published', record: { state: 'published', jid: record.jid } }]);
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect(world.standIn.publicationsUnder(record.jid)).toBe(1);
    expect(published.map((r) => r.request_id)).toEqual([record.request_id]);
    expect(outcomes).toEqual(['published']);
    expect(outboxFiles()).toEqual([]);
    expect(await relayOnce(deps)).toEqual([]);
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
  });

  it('defers a publication that provably sent nothing and publishes it later with the same JID', async () => {
    const record = await admitOne();
    const unreachable = { ...deps, salt: createSaltApiClient({ url: await refusedUrl(), username: 'oduflow', passwordFile: world.passwordFile, eauth: 'sharedsecret' }) };
    const first = await relayOnce(unreachable, { notSentBackoffMs: 5_000 });
    expect(first).toMatchObject([{ requestId: record.request_id, outcome: 'not_sent', failure: 'connection_refused', record: { state: 'prepared', jid: record.jid } }]);
    expect(outboxFiles()).toEqual([`${record.request_id}.json`]);
    // Not due before the backoff ends.
    expect(await relayOnce(deps)).toEqual([]);
    skew = 5_000;
    expect(await relayOnce(deps)).toMatchObject([{ requestId: record.request_id, outcome: 'published', record: { jid: record.jid, publish_attempts: 2 } }]);
    expect(world.standIn.publications.map((p) => p.jid)).toEqual([record.jid]);
    expect(outboxFiles()).toEqual([]);
  });

  it('doubles the pause after each attempt that sent nothing', async () => {
    const record = await admitOne();
    const unreachable = { ...deps, salt: createSaltApiClient({ url: await refusedUrl(), username: 'oduflow', passwordFile: world.passwordFile, eauth: 'sharedsecret' }) };
    expect((await relayOnce(unreachable, { notSentBackoffMs: 1_000 }))[0]?.outcome).toBe('not_sent');
    skew = 1_000;
    expect((await relayOnce(unreachable, { notSentBackoffMs: 1_000 }))[0]?.outcome).toBe('not_sent'); // attempt 2: due 2 s later
    skew = 2_500;
    expect(await relayOnce(deps)).toEqual([]);
    skew = 3_100;
    expect((await relayOnce(deps))[0]).toMatchObject({ requestId: record.request_id, outcome: 'published' });
  });

  it('handles an entry at most once per pass and hands back the claim of one that came due again meanwhile', async () => {
    const record = await admitOne();
    const unreachable = { ...deps, salt: createSaltApiClient({ url: await refusedUrl(), username: 'oduflow', passwordFile: world.passwordFile, eauth: 'sharedsecret' }) };
    // A 1 ms backoff on a clock that steps 1 ms per reading: due again within the same pass.
    expect((await relayOnce(unreachable, { notSentBackoffMs: 1 })).map((r) => r.outcome)).toEqual(['not_sent']);
    // Not held for a lease: the next pass takes it at once.
    expect(await relayOnce(deps)).toMatchObject([{ requestId: record.request_id, outcome: 'published', record: { jid: record.jid } }]);
  });

  it('never publishes a request reconciled while it waited in the outbox, and drops its entry', async () => {
    const record = await admitOne();
    await reconcile(deps, record.request_id, { reason: 'not wanted any more', actor: 'ops' });
    expect(await relayOnce(deps)).toMatchObject([{ requestId: record.request_id, outcome: 'skipped', skip: 'not_prepared', record: { state: 'reconciled' } }]);
    expect(world.standIn.publications).toEqual([]);
    expect(outboxFiles()).toEqual([]);
  });

  it('asks a stale entry\'s minion again: an answer that is not ready rejects the request, frees the target and drops the entry', async () => {
    const record = await admitOne();
    world.standIn.capabilities = () => ({ retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['cache_jobs'] } });
    skew = 300_001;
    const results = await relayOnce(deps);
    expect(results).toMatchObject([{ requestId: record.request_id, outcome: 'skipped', skip: 'not_ready', record: { state: 'rejected', reason: { code: 'not_ready', readiness: ['cache_jobs'] } } }]);
    expect(world.standIn.publications).toEqual([]);
    expect(outboxFiles()).toEqual([]);
    expect(await world.store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
  });

  it('defers a stale entry whose minion does not answer, and publishes it once the minion answers ready', async () => {
    const record = await admitOne();
    world.standIn.capabilities = () => ({ noReturn: true });
    skew = 300_001;
    expect(await relayOnce(deps, { notSentBackoffMs: 1_000 })).toMatchObject([{ requestId: record.request_id, outcome: 'skipped', skip: 'unreachable', record: { state: 'prepared' } }]);
    expect(outboxFiles()).toEqual([`${record.request_id}.json`]);
    world.standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
    skew = 301_002;
    expect(await relayOnce(deps)).toMatchObject([{ requestId: record.request_id, outcome: 'published' }]);
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
  });

  it('does not ask a fresh entry\'s minion again before publishing it', async () => {
    await admitOne();
    const asked = world.standIn.calls.filter((c) => c.fun === 'oduflow_job.capabilities').length;
    await relayOnce(deps);
    expect(world.standIn.calls.filter((c) => c.fun === 'oduflow_job.capabilities').length).toBe(asked);
  });

  it('drops an entry whose record does not exist, and one whose state data is not its record\'s, publishing neither', async () => {
    const record = await admitOne();
    const ghost = '1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5';
    const removed: string[] = [];
    let handedOut = false;
    const store = wrapStore(world.store, {
      claimOutbox: async (options) => {
        if (handedOut) return [];
        handedOut = true;
        const real = await world.store.claimOutbox(options);
        return [...real.map((e) => ({ ...e, stateDataJson: '{"a":1}' })), { requestId: ghost, stateDataJson: '', enqueuedAt: record.created_at, attempts: 1 }];
      },
      removeOutbox: async (id) => {
        removed.push(id);
        return world.store.removeOutbox(id);
      },
    });
    const results = await relayOnce({ ...deps, store });
    expect(results.map((r) => [r.requestId, r.outcome, r.outcome === 'skipped' ? r.skip : '']).sort()).toEqual(
      [
        [record.request_id, 'skipped', 'state_data_mismatch'],
        [ghost, 'skipped', 'no_record'],
      ].sort(),
    );
    expect(removed.sort()).toEqual([record.request_id, ghost].sort());
    expect(world.standIn.publications).toEqual([]);
    expect((await world.store.get(record.request_id))?.state).toBe('prepared');
  });

  it('refuses settings that are not whole numbers in range', async () => {
    await expect(relayOnce(deps, { concurrency: 0 })).rejects.toMatchObject({ code: 'config_invalid' });
    await expect(relayOnce(deps, { leaseMs: 1.5 })).rejects.toMatchObject({ code: 'config_invalid' });
  });
});

describe('startOutboxRelay', () => {
  it('publishes every admitted request exactly once with several relays running on one store', async () => {
    const records: ProtocolRequestRecord[] = [];
    for (let n = 1; n <= 12; n += 1) records.push(await admitOne(minion(n), `k-${n}`));
    const controller = new AbortController();
    const relays = [0, 1, 2].map(() => startOutboxRelay({ ...world.anotherWorker(), now: clock }, { signal: controller.signal, concurrency: 4, idleMs: 5 }));
    try {
      await until(async () => (await world.store.list({ states: ['published'] })).length === records.length);
    } finally {
      controller.abort();
      await Promise.all(relays.map((r) => r.done));
    }
    for (const record of records) expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect(world.standIn.publications).toHaveLength(records.length);
    expect(outboxFiles()).toEqual([]);
  });

  it('looks at the outbox at once when woken instead of after its idle pause', async () => {
    let emptyClaims = 0;
    const store = wrapStore(world.store, {
      claimOutbox: async (options) => {
        const claimed = await world.store.claimOutbox(options);
        if (claimed.length === 0) emptyClaims += 1;
        return claimed;
      },
    });
    const controller = new AbortController();
    const relay = startOutboxRelay({ ...deps, store }, { signal: controller.signal, idleMs: 60_000 });
    try {
      await until(() => emptyClaims === 1); // found nothing: now in its 60 s pause
      const record = await admitOne();
      relay.wake();
      // Well inside the 60 s pause it was in.
      await until(() => world.standIn.publicationsOf(record.request_id) === 1, 5_000);
    } finally {
      controller.abort();
      await relay.done;
    }
  });

  it('publishes each request once even when claims lapse at once and relays keep taking each other\'s entries', async () => {
    const records: ProtocolRequestRecord[] = [];
    for (let n = 1; n <= 8; n += 1) records.push(await admitOne(minion(n), `k-${n}`));
    const handled: string[] = [];
    const controller = new AbortController();
    const relays = [0, 1, 2].map(() =>
      startOutboxRelay(
        { ...world.anotherWorker(), now: clock },
        { signal: controller.signal, concurrency: 4, idleMs: 5, leaseMs: 1, metrics: { onPublication: (o) => handled.push(o) } },
      ),
    );
    try {
      await until(async () => (await world.store.list({ states: ['published'] })).length === records.length && outboxFiles().length === 0);
    } finally {
      controller.abort();
      await Promise.all(relays.map((r) => r.done));
    }
    for (const record of records) expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect(world.standIn.publicationRequests).toBe(records.length);
    expect(handled.filter((o) => o === 'published')).toHaveLength(records.length);
  });

  it('on abort finishes the publication in flight and records its outcome before it resolves', async () => {
    const record = await admitOne();
    world.standIn.publishMode = 'hold';
    const controller = new AbortController();
    const relay = startOutboxRelay(deps, { signal: controller.signal, idleMs: 5 });
    await until(() => world.standIn.publications.length === 1);
    controller.abort();
    expect((await world.store.get(record.request_id))?.state).toBe('publishing');
    world.standIn.releaseHeld();
    await relay.done;
    expect(await world.store.get(record.request_id)).toMatchObject({ state: 'published' });
    expect(outboxFiles()).toEqual([]);
  });

  it('resolves at once when started with an aborted signal, claiming nothing', async () => {
    await admitOne();
    const controller = new AbortController();
    controller.abort();
    await startOutboxRelay(deps, { signal: controller.signal }).done;
    expect(world.standIn.publications).toEqual([]);
    expect(outboxFiles()).toHaveLength(1);
  });
});

describe('a relay SIGKILLed mid-relay (real process)', () => {
  const job = () => ({ root: world.storeRoot, url: world.standIn.url, username: world.standIn.username, passwordFile: world.passwordFile });
  /** Another relay, once the dead one's claim (120 s) lapsed. */
  const takeOver = () => relayOnce({ ...deps, now: () => new Date(Date.now() + 121_000) });

  it('after the intent, before the Salt call (P2): nothing was published, and no later relay publishes it', async () => {
    const record = await admitOne();
    const run = await startRelayJob({ ...job(), at: 'P2' }).ended;
    expect(run.signal, run.stderr).toBe('SIGKILL');
    expect(world.standIn.publicationRequests).toBe(0);
    expect((await world.store.get(record.request_id))?.state).toBe('publishing');
    expect(await relayOnce(deps)).toEqual([]); // its claim is still live
    expect(await takeOver()).toMatchObject([{ requestId: record.request_id, outcome: 'skipped', skip: 'not_prepared' }]);
    expect(world.standIn.publicationRequests).toBe(0);
    expect(outboxFiles()).toEqual([]);
  });

  it('after the Salt call, before its outcome is recorded (P3): published once, and never again', async () => {
    const record = await admitOne();
    const run = await startRelayJob({ ...job(), at: 'P3' }).ended;
    expect(run.signal, run.stderr).toBe('SIGKILL');
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect((await world.store.get(record.request_id))?.state).toBe('publishing');
    expect(await takeOver()).toMatchObject([{ requestId: record.request_id, outcome: 'skipped', skip: 'not_prepared' }]);
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect(world.standIn.publicationRequests).toBe(1);
  });

  it('while salt-api holds its publication: published once, and never again', async () => {
    const record = await admitOne();
    world.standIn.publishMode = 'hold';
    const relay = startRelayJob(job());
    await until(() => world.standIn.publications.length === 1);
    expect((await relay.kill()).signal).toBe('SIGKILL');
    world.standIn.publishMode = 'ack';
    world.standIn.releaseHeld();
    expect(await takeOver()).toMatchObject([{ requestId: record.request_id, outcome: 'skipped', skip: 'not_prepared' }]);
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect(world.standIn.publicationRequests).toBe(1);
    expect((await world.store.get(record.request_id))?.state).toBe('publishing');
  });

  it('runs to its end in a child process without a crash point', async () => {
    const record = await admitOne();
    const run = await startRelayJob(job()).ended;
    expect(run, run.stderr).toMatchObject({ code: 0, signal: null });
    expect(run.stdout).toContain(`DONE [{"requestId":"${record.request_id}","outcome":"published"}]`);
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
  });
});
