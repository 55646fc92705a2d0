import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { startPostgres, type PostgresCluster } from '../../../../packages/test-harness/src/postgres.js';
import { EXIT } from '../../src/exit-codes.js';
import { assertBuilt } from '../support/cli.js';
import { buildCrashCli, removeCrashCli } from '../support/crash-entry.js';
import { FLEET_TOKEN, getJson, postRequest, startPgInstances, type PgInstances } from './support/pg-instances.js';
import { waitFor } from './support/service-world.js';

/*
 * One of two `serve` instances on one PostgreSQL database is SIGKILLed
 * while its outbox relay is inside a publication; the other, already
 * running, takes the outbox over once the dead one's claim lapses
 * (--relay-lease-ms, short here). Publications are counted at the salt-api
 * stand-in, whose `hold` mode keeps a publication's answer back so the kill
 * lands after Salt was called and before the acknowledgement is recorded.
 * And the variant through the crash entry, killed after the publish intent
 * and before Salt is called (P2): that request is never published, keeps
 * its target blocked as published-uncertain, and only a reconcile frees it.
 */

const LEASE_MS = 8_000;

let cluster: PostgresCluster;
let crashCli: string;
let standIn: SaltApiStandIn;
let world: PgInstances;
let databases = 0;

beforeAll(async () => {
  assertBuilt();
  cluster = await startPostgres();
  crashCli = await buildCrashCli();
}, 120_000);
afterAll(async () => {
  removeCrashCli(crashCli);
  await cluster.stop();
}, 60_000);
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  databases += 1;
  world = await startPgInstances(cluster, standIn, {
    database: `takeover_${process.pid}_${databases}`,
    minions: 4,
    env: { ODUFLOW_RELAY_LEASE_MS: String(LEASE_MS), ODUFLOW_POLL_WALK_INTERVAL_MS: '300' },
  });
}, 60_000);
afterEach(async () => {
  await world.close();
  await standIn.close();
});

async function admitted(address: string, key: string, minionId: string): Promise<ProtocolRequestRecord> {
  const response = await postRequest(address, key, { minion_id: minionId, profile: 'configure' });
  expect(response.status).toBe(202);
  return (await response.json()) as ProtocolRequestRecord;
}

async function recordOf(requestId: string): Promise<ProtocolRequestRecord | undefined> {
  return (await world.records()).find((r) => r.request_id === requestId);
}

async function until(requestId: string, state: string, what: string): Promise<ProtocolRequestRecord> {
  await waitFor(async () => (await recordOf(requestId))?.state === state, 30_000, what);
  return (await recordOf(requestId)) as ProtocolRequestRecord;
}

describe('an instance SIGKILLed mid-relay, on PostgreSQL', () => {
  it('is taken over by the other instance: the request inside the publication is never published again and is polled to its answer', async () => {
    const [m0, m1, m2, m3] = world.minions as [string, string, string, string];
    const publishedAt = new Map<string, number>();
    standIn.onPublication = (p) => publishedAt.set(String(p.args[0]), p.at);
    standIn.publishMode = 'hold';
    const a = world.serve();
    const first = await admitted(await a.address, 'takeover-first', m0);
    // A's relay is inside the publication: the intent is recorded, Salt has it, its answer is held.
    await waitFor(() => standIn.publicationsOf(first.request_id) === 1, 15_000, 'A published the first request');
    expect(await recordOf(first.request_id)).toMatchObject({ state: 'publishing', publish_attempts: 1 });

    // While A holds the publication the minion has not received it yet: B's poller, asking meanwhile, sees
    // `not_started`, which keeps the request published-uncertain; only after the kill does the minion answer
    // with its receipt.
    let killed = false;
    standIn.status = (args, _minion, simulated) =>
      !killed && args[0] === first.request_id && 'ret' in simulated
        ? { retcode: 0, ret: { ...(simulated.ret as Record<string, unknown>), status: 'not_started', passed: 0, total: 0 } }
        : simulated;
    const b = world.serve();
    const bAddress = await b.address;
    standIn.publishMode = 'ack';
    const stateAtKill = (await recordOf(first.request_id))?.state;
    expect(stateAtKill).toBe('publishing');
    const killedAt = Date.now();
    a.child.kill('SIGKILL');
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    killed = true;
    const [claim] = await world.outboxClaims();
    expect(claim, 'the dead relay still holds its claim on the entry').toMatchObject({ requestId: first.request_id, claimedUntil: expect.any(Number) as number });
    const claimedUntil = (claim as { claimedUntil: number }).claimedUntil;
    expect(claimedUntil).toBeGreaterThan(Date.now());

    // Admitted meanwhile, through B: published by B at once, each exactly once, while the dead claim still stands.
    const others = [await admitted(bAddress, 'takeover-2', m1), await admitted(bAddress, 'takeover-3', m2), await admitted(bAddress, 'takeover-4', m3)];
    for (const r of others) {
      await until(r.request_id, 'succeeded', `${r.request_id} succeeded`);
      expect(standIn.publicationsOf(r.request_id)).toBe(1);
    }
    for (const r of others) expect(publishedAt.get(r.request_id)).toBeLessThan(claimedUntil);

    // After the lease, B claims the dead relay's entry, finds the request no longer prepared, and drops it.
    await waitFor(async () => (await world.outboxSize()) === 0, 30_000, 'B took over the outbox entry');
    const takenOverAt = Date.now();
    expect(takenOverAt).toBeGreaterThanOrEqual(claimedUntil);
    // The request was published-uncertain (intent, no acknowledgement); B's poller asked the minion and recorded its receipt.
    const settled = await until(first.request_id, 'succeeded', 'the first request polled to its receipt');
    expect(settled).toMatchObject({ publish_attempts: 1, passed: 60, total: 60, last_observation: { status: 'succeeded' } });
    expect(Date.parse(settled.updated_at)).toBeGreaterThanOrEqual(killedAt);
    standIn.releaseHeld(); // the held answer goes to a dead socket
    expect(standIn.publicationsOf(first.request_id)).toBe(1);
    expect(standIn.publicationRequests).toBe(4);
    expect(await getJson(bAddress, `/v1/targets/${m0}`)).toMatchObject({ blocked: false });
    const ms = (at: number | undefined): number => (at ?? Number.NaN) - killedAt;
    console.log(
      `[takeover] lease ${LEASE_MS} ms: at the SIGKILL the request was ${stateAtKill ?? '?'} (published-uncertain), the dead claim lapsed ${ms(claimedUntil)} ms later; ` +
        `requests admitted meanwhile were published by B ${others.map((r) => ms(publishedAt.get(r.request_id))).join('/')} ms after the kill; ` +
        `B dropped the dead relay's entry by ${ms(takenOverAt)} ms (checked every 10 ms, through psql); B's poller recorded the minion's receipt ${ms(Date.parse(settled.updated_at))} ms after the kill (its backoff after \`not_started\`); publications of it: ${standIn.publicationsOf(first.request_id)}`,
    );

    b.child.kill('SIGTERM');
    expect((await b.exited).code).toBe(EXIT.ok);
    expect(standIn.publicationsOf(first.request_id)).toBe(1);
  }, 120_000);

  it('killed after the publish intent and before Salt (P2): the request is never published, stays blocking as published-uncertain, and only a reconcile frees its target', async () => {
    const [m0, m1] = world.minions as [string, string];
    // B runs first, with one relay slot, and that slot is kept busy inside a held publication: the entry A
    // admits next can only be claimed by A's relay (which the crash entry kills at P2).
    standIn.publishMode = 'hold';
    const b = world.serve({ ODUFLOW_RELAY_CONCURRENCY: '1' });
    const bAddress = await b.address;
    const busy = await admitted(bAddress, 'p2-busy', m0);
    await waitFor(() => standIn.publicationsOf(busy.request_id) === 1, 15_000, 'B is inside a publication');

    const a = world.serve({}, { path: crashCli, args: ['P2'] });
    const aAddress = await a.address;
    const response = await postRequest(aAddress, 'p2-victim', { minion_id: m1, profile: 'configure' }).catch(() => undefined);
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const victim = (await world.records()).find((r) => r.minion_id === m1) as ProtocolRequestRecord;
    if (response?.status === 202) expect(((await response.json()) as ProtocolRequestRecord).request_id).toBe(victim.request_id);
    expect(victim).toMatchObject({ state: 'publishing', publish_attempts: 1 });

    standIn.publishMode = 'ack';
    standIn.releaseHeld();
    await until(busy.request_id, 'succeeded', 'B finished its own publication');

    // B takes the dead relay's entry over after the lease and only drops it; its poller asks the minion, which never got it.
    await waitFor(async () => (await world.outboxSize()) === 0, 30_000, 'B took over the outbox entry');
    await waitFor(
      async () => {
        const r = await recordOf(victim.request_id);
        return r?.last_observation !== null && r?.last_observation !== undefined && 'status' in r.last_observation && r.last_observation.status === 'not_started';
      },
      30_000,
      'B polled the victim',
    );
    expect(await recordOf(victim.request_id)).toMatchObject({ state: 'publishing', publish_attempts: 1 });
    expect(standIn.publicationsOf(victim.request_id)).toBe(0);

    // Blocking: another admission to its target is refused, naming it.
    const refused = await postRequest(bAddress, 'p2-next', { minion_id: m1, profile: 'configure' });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: 'target_blocked', blocking_request_id: victim.request_id });
    expect(await getJson(bAddress, `/v1/targets/${m1}`)).toMatchObject({ blocked: true, blockers: [expect.objectContaining({ request_id: victim.request_id })] });

    // Only an operator's reconcile frees it; the next request on the target is then published once.
    const reconciled = await fetch(`${bAddress}/v1/requests/${victim.request_id}/reconcile`, {
      method: 'POST',
      headers: { authorization: `Bearer ${FLEET_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'checked on the host: the P2 request never ran' }),
    });
    expect(reconciled.status).toBe(200);
    expect(await reconciled.json()).toMatchObject({ state: 'reconciled', reconciliation: { actor: 'hammer' } });
    const next = await admitted(bAddress, 'p2-next', m1);
    await until(next.request_id, 'succeeded', 'the next request on the freed target succeeded');
    expect(standIn.publicationsOf(next.request_id)).toBe(1);
    expect(standIn.publicationsOf(victim.request_id)).toBe(0);

    b.child.kill('SIGTERM');
    expect((await b.exited).code).toBe(EXIT.ok);
  }, 120_000);
});
