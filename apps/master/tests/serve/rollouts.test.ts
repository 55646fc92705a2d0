import type { RolloutReport } from '@oduflow/master-runner';
import { openPrivateDir } from '@oduflow/receipt-store';
import { Validator } from '@seriousme/openapi-schema-validator';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { rolloutIdOfKey } from '../../src/serve/rollout-id.js';
import { tokenRegistry } from '../../src/serve/tokens.js';
import { HOSTILE_PATH, HOSTILE_SECRET } from '../support/hostile.js';
import { FLEET, fleetTokensFile, publicationsPerMinion, statusFor } from './support/rollout-fleet.js';
import { ACME_A, ACME_B, GLOBEX_A, NOBODYS, TOKENS, startServiceWorld, waitFor, type ServiceWorld } from './support/service-world.js';

/*
 * /v1/rollouts in a service in this process (fastify inject), over a file
 * store, the salt-api stand-in (which counts every publication) and a
 * private rollout workspace. The shutdown and restart proofs run the real
 * executable: rollouts-process.test.ts.
 */

let world: ServiceWorld;
const fleetTokens = tokenRegistry(fleetTokensFile(), '/test/tokens.json');

beforeAll(async () => {
  world = await startServiceWorld({ tokens: () => fleetTokens });
});
afterAll(async () => {
  await world.close();
});
beforeEach(() => {
  world.standIn.status = (_args, _minion, simulated) => simulated;
  world.standIn.publications.length = 0;
});

let keys = 0;
/** A key no other test uses. */
const freshKey = (): string => `rollout-key-${process.pid}-${(keys += 1)}`;

function post(body: unknown, options: { token?: string; key?: string | undefined } = {}): ReturnType<ServiceWorld['call']> {
  const key = 'key' in options ? options.key : freshKey();
  return world.call({ method: 'POST', url: '/v1/rollouts', token: options.token ?? TOKENS.acmeAll, ...(key === undefined ? {} : { key }), payload: body as Record<string, unknown> });
}

async function report(id: string, token: string = TOKENS.acmeRead): Promise<RolloutReport> {
  const response = await world.call({ method: 'GET', url: `/v1/rollouts/${id}`, token });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<RolloutReport>();
}

async function finished(id: string, deadlineMs = 20_000): Promise<RolloutReport> {
  let last: RolloutReport | undefined;
  await waitFor(async () => ['succeeded', 'failed'].includes((last = await report(id)).status), deadlineMs, `rollout ${id} finished`);
  return last as RolloutReport;
}

function rolloutDirs(tenant: string): string[] {
  const dir = join(world.rolloutWorkspace, 'http', tenant);
  return existsSync(dir) ? readdirSync(dir) : [];
}

describe('POST /v1/rollouts', () => {
  it('starts a rollout of a few dozen targets: 202 with a Location, progress while it runs, the final report, and one publication per target', async () => {
    let holdBatch2 = true;
    const batch2 = new Set(FLEET.slice(10, 20));
    world.standIn.status = statusFor((minion) => (holdBatch2 && batch2.has(minion) ? 'running' : undefined));
    world.standIn.returnEvents = false;
    try {
      const response = await post({ profile: 'configure', targets: [...FLEET].reverse(), batch_size: 10 });
      expect(response.statusCode, response.body).toBe(202);
      const started = response.json<RolloutReport>();
      expect(response.headers['location']).toBe(`/v1/rollouts/${started.rollout_id}`);
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(started).toMatchObject({ status: 'running', run_id: started.rollout_id, profile: 'configure', target_count: 36, batch_size: 10, max_unresolved: 0 });
      expect(started.stages).toHaveLength(4);

      // Progress: the first batch settled, the second dispatched and still running on its minions.
      await waitFor(async () => {
        const now = await report(started.rollout_id);
        return now.stages[0]?.status === 'succeeded' && now.stages[1]?.status === 'running' && now.targets.length === 20;
      }, 20_000, 'the second batch is being polled');
      const progress = await report(started.rollout_id);
      expect(progress).toMatchObject({ status: 'running', finished_at: null });
      expect(progress.counts).toMatchObject({ succeeded: 10, pending: 10, not_reached: 16 });

      holdBatch2 = false;
      const done = await finished(started.rollout_id);
      expect(done).toMatchObject({ status: 'succeeded', halted: null, budget_used: 0, rollout_id: started.rollout_id });
      expect(done.counts).toMatchObject({ succeeded: 36, pending: 0, not_reached: 0, failed: 0 });
      expect(done.stages.map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
      const perMinion = publicationsPerMinion(world.standIn.publications);
      expect([...perMinion.keys()].sort()).toEqual([...FLEET]);
      expect(new Set(perMinion.values())).toEqual(new Set([1]));
    } finally {
      world.standIn.returnEvents = true;
    }
  });

  it('shows a budget halt in the report and dispatches nothing after the batch that spent it', async () => {
    const failing = new Set(FLEET.slice(0, 2));
    world.standIn.status = statusFor((minion) => (failing.has(minion) ? 'failed' : undefined));
    world.standIn.returnEvents = false;
    try {
      const response = await post({ profile: 'configure', targets: FLEET.slice(0, 30), batch_size: 10, max_unresolved: 1 });
      expect(response.statusCode, response.body).toBe(202);
      const done = await finished(response.json<RolloutReport>().rollout_id);
      expect(done).toMatchObject({ status: 'failed', halted: 'budget_exceeded', budget_used: 2, max_unresolved: 1 });
      expect(done.counts).toMatchObject({ succeeded: 8, failed: 2, not_reached: 20 });
      expect(done.stages.map((s) => [s.status, s.error])).toEqual([
        ['failed', 'budget_exceeded'],
        ['pending', null],
        ['pending', null],
      ]);
      expect(world.standIn.publications.map((p) => p.minionId).sort()).toEqual(FLEET.slice(0, 10));
    } finally {
      world.standIn.returnEvents = true;
    }
  });

  it('runs a dry run without dispatching anything', async () => {
    const response = await post({ profile: 'production', targets: FLEET.slice(0, 3), dry_run: true });
    expect(response.statusCode, response.body).toBe(202);
    const done = await finished(response.json<RolloutReport>().rollout_id);
    expect(done).toMatchObject({ status: 'succeeded', dry_run: true, profile: 'production' });
    expect(done.counts.skipped).toBe(3);
    expect(world.standIn.publications).toEqual([]);
  });
});

describe('the Idempotency-Key of POST /v1/rollouts', () => {
  const body = { profile: 'configure', targets: FLEET.slice(0, 3), batch_size: 2 };

  it('is required, and a malformed one is refused: 400 before anything is written or asked', async () => {
    const calls = world.standIn.callCount;
    const before = rolloutDirs('acme');
    const missing = await post(body, { key: undefined });
    expect(missing.statusCode).toBe(400);
    expect(missing.headers['content-type']).toContain('application/problem+json');
    expect(missing.json()).toMatchObject({ type: 'https://oduflow.dev/problems/invalid_idempotency_key', reason: 'missing' });
    expect(missing.json<{ detail: string }>().detail).not.toContain('/v1/requests');
    for (const [key, reason] of [
      ['"unterminated', 'malformed'],
      ['two words', 'malformed'],
      ['""', 'empty'],
      ['k'.repeat(256), 'too_long'],
    ] as const) {
      const refused = await post(body, { key });
      expect(refused.statusCode, key).toBe(400);
      expect(refused.json(), key).toMatchObject({ code: 'invalid_idempotency_key', reason });
    }
    expect(world.standIn.callCount).toBe(calls);
    expect(rolloutDirs('acme')).toEqual(before);
  });

  it('with the same rollout answers the same rollout (Idempotent-Replayed), in any target order and after it finished, and publishes nothing more', async () => {
    const key = freshKey();
    const first = await post(body, { key });
    expect(first.statusCode, first.body).toBe(202);
    const id = first.json<RolloutReport>().rollout_id;
    expect(id).toBe(rolloutIdOfKey({ tenant: 'acme', actor: 'acme-ops', key }));
    const done = await finished(id);
    const published = world.standIn.publications.length;
    expect(published).toBe(3);

    // The same rollout: the target set (any order, duplicates), and the defaults spelled out.
    const again = await post({ ...body, targets: [...body.targets].reverse().concat(body.targets[0] as string), max_unresolved: 0, dry_run: false }, { key });
    expect(again.statusCode, again.body).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['location']).toBe(`/v1/rollouts/${id}`);
    expect(again.json()).toEqual(done);
    expect(world.standIn.publications).toHaveLength(published);
  });

  it('with another rollout is 422 key_mismatch, and nothing new is started', async () => {
    const key = freshKey();
    const first = await post(body, { key });
    expect(first.statusCode).toBe(202);
    await finished(first.json<RolloutReport>().rollout_id);
    const dirs = rolloutDirs('acme');
    for (const other of [{ ...body, batch_size: 3 }, { ...body, targets: FLEET.slice(0, 4) }, { ...body, profile: 'production' }, { ...body, dry_run: true }, { ...body, max_unresolved: 2 }]) {
      const refused = await post(other, { key });
      expect(refused.statusCode, JSON.stringify(other)).toBe(422);
      expect(refused.json()).toMatchObject({ code: 'key_mismatch', type: 'https://oduflow.dev/problems/key_mismatch' });
    }
    expect(rolloutDirs('acme')).toEqual(dirs);
    expect(world.standIn.publications).toHaveLength(3);
  });

  it('is 409 key_in_flight while the first rollout with that key is being started', async () => {
    const key = freshKey();
    const id = rolloutIdOfKey({ tenant: 'acme', actor: 'acme-ops', key });
    // Hold the rollout's start lock as a first POST starting it does (a flock conflicts across descriptors, in one process too).
    const dir = openPrivateDir(join(world.rolloutWorkspace, 'http', 'acme', id), { create: true });
    const lock = dir.tryLockSync('start.lock');
    expect(lock).toBeDefined();
    try {
      const busy = await post(body, { key });
      expect(busy.statusCode).toBe(409);
      expect(busy.json()).toMatchObject({ code: 'key_in_flight' });
      expect(busy.headers['retry-after']).toBe('1');
      expect(world.standIn.publications).toEqual([]);
    } finally {
      lock?.release();
      dir.close();
    }
    const started = await post(body, { key });
    expect(started.statusCode, started.body).toBe(202);
    expect(started.headers['idempotent-replayed']).toBeUndefined();
    await finished(id);
  });

  it('starts one rollout when two POSTs with one key race: the other is 409 or the replay', async () => {
    const key = freshKey();
    const [a, b] = await Promise.all([post(body, { key }), post(body, { key })]);
    const statuses = [a, b].map((r) => `${r.statusCode}${r.headers['idempotent-replayed'] === 'true' ? ' replayed' : ''}`).sort();
    expect([['202', '202 replayed'], ['202', '409']]).toContainEqual(statuses);
    await finished(rolloutIdOfKey({ tenant: 'acme', actor: 'acme-ops', key }));
    expect([...publicationsPerMinion(world.standIn.publications).values()]).toEqual([1, 1, 1]);
  });

  it('is scoped by tenant and actor: the same key from another token names another rollout', async () => {
    const key = freshKey();
    const ops = await post(body, { key });
    const ci = await post(body, { key, token: TOKENS.acmeDispatch });
    expect([ops.statusCode, ci.statusCode]).toEqual([202, 202]);
    expect(ci.headers['idempotent-replayed']).toBeUndefined();
    const [opsId, ciId] = [ops, ci].map((r) => r.json<RolloutReport>().rollout_id);
    expect(opsId).not.toBe(ciId);
    await finished(opsId as string);
    await finished(ciId as string);
  });
});

describe('rollouts, scopes and tenants', () => {
  it('needs a token with the dispatch scope, and dispatch:custom for a custom rollout', async () => {
    const anonymous = await world.call({ method: 'POST', url: '/v1/rollouts', key: freshKey(), payload: { profile: 'configure', targets: [ACME_A] } });
    expect(anonymous.statusCode).toBe(401);
    const reader = await post({ profile: 'configure', targets: [ACME_A] }, { token: TOKENS.acmeRead });
    expect(reader.statusCode).toBe(403);
    expect(reader.json()).toMatchObject({ code: 'forbidden', required_scope: 'dispatch' });
    const custom = { profile: 'custom', targets: [ACME_A], state_data: { marker: { 'file.touch': [{ name: '/tmp/oduflow-marker' }] } } };
    const plain = await post(custom, { token: TOKENS.acmeDispatch });
    expect(plain.statusCode).toBe(403);
    expect(plain.json()).toMatchObject({ code: 'forbidden', required_scope: 'dispatch:custom' });
    expect(world.standIn.publications).toEqual([]);
  });

  it('refuses a rollout with a target its tenant does not own, naming none of them, before anything is written', async () => {
    const before = rolloutDirs('acme');
    for (const targets of [[ACME_A, GLOBEX_A], [NOBODYS, ACME_B], [GLOBEX_A]]) {
      const refused = await post({ profile: 'configure', targets });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toMatchObject({ code: 'target_not_owned' });
      expect(refused.body).not.toContain(GLOBEX_A);
      expect(refused.body).not.toContain(NOBODYS);
    }
    expect(rolloutDirs('acme')).toEqual(before);
    expect(world.standIn.publications).toEqual([]);
  });

  it('shows a tenant only its own rollouts: another tenant’s is 404, exactly like one that does not exist', async () => {
    const response = await post({ profile: 'configure', targets: [ACME_A] });
    const id = response.json<RolloutReport>().rollout_id;
    await finished(id);
    const foreign = await world.call({ method: 'GET', url: `/v1/rollouts/${id}`, token: TOKENS.globexAll });
    const missing = await world.call({ method: 'GET', url: '/v1/rollouts/0190e6a5-1c2d-8e3f-8a4b-5c6d7e8f9a0b', token: TOKENS.globexAll });
    expect([foreign.statusCode, missing.statusCode]).toEqual([404, 404]);
    expect(foreign.json<{ detail: string }>().detail).toBe(missing.json<{ detail: string }>().detail);
    const globexList = await world.call({ method: 'GET', url: '/v1/rollouts', token: TOKENS.globexAll });
    expect(globexList.json()).toEqual({ items: [], next_cursor: null });
    const acmeList = await world.call({ method: 'GET', url: '/v1/rollouts?limit=500', token: TOKENS.acmeRead });
    expect(acmeList.json<{ items: { rollout_id: string }[] }>().items.map((i) => i.rollout_id)).toContain(id);
    expect((await world.call({ method: 'GET', url: '/v1/rollouts/not-an-id', token: TOKENS.acmeRead })).statusCode).toBe(400);
    expect((await world.call({ method: 'GET', url: `/v1/rollouts/${id}` })).statusCode).toBe(401);
  });
});

describe('GET /v1/rollouts', () => {
  it('lists the tenant’s rollouts a page at a time, each with its latest run and status', async () => {
    const tenantWorld = await startServiceWorld({ tokens: () => fleetTokens });
    try {
      const ids: string[] = [];
      for (const target of FLEET.slice(0, 3)) {
        const r = await tenantWorld.call({ method: 'POST', url: '/v1/rollouts', token: TOKENS.acmeAll, key: `list-${target}`, payload: { profile: 'configure', targets: [target] } });
        expect(r.statusCode, r.body).toBe(202);
        ids.push(r.json<RolloutReport>().rollout_id);
      }
      await waitFor(async () => {
        const all = await tenantWorld.call({ method: 'GET', url: '/v1/rollouts', token: TOKENS.acmeRead });
        return all.json<{ items: { status: string }[] }>().items.every((i) => i.status === 'succeeded');
      }, 20_000, 'every rollout finished');
      const first = await tenantWorld.call({ method: 'GET', url: '/v1/rollouts?limit=2', token: TOKENS.acmeRead });
      const page1 = first.json<{ items: { rollout_id: string; run_id: string; status: string; target_count: number; stages: number }[]; next_cursor: string | null }>();
      expect(page1.items).toHaveLength(2);
      expect(page1.next_cursor).not.toBeNull();
      expect(page1.items[0]).toMatchObject({ status: 'succeeded', target_count: 1, stages: 1, profile: 'configure', dry_run: false });
      const second = await tenantWorld.call({ method: 'GET', url: `/v1/rollouts?limit=2&cursor=${page1.next_cursor ?? ''}`, token: TOKENS.acmeRead });
      const page2: typeof page1 = second.json();
      expect(page2.items).toHaveLength(1);
      expect(page2.next_cursor).toBeNull();
      expect([...page1.items, ...page2.items].map((i) => i.rollout_id)).toEqual([...ids].sort());
      expect((await tenantWorld.call({ method: 'GET', url: '/v1/rollouts?cursor=bogus!', token: TOKENS.acmeRead })).statusCode).toBe(400);
    } finally {
      await tenantWorld.close();
    }
  });
});

describe('a custom rollout over HTTP', () => {
  it('publishes its state data with each dispatch, never shows it, and forgets it once the rollout ended', async () => {
    const stateData = { marker: { 'file.touch': [{ name: '/tmp/oduflow-rollout-marker-secret' }] } };
    const response = await post({ profile: 'custom', targets: FLEET.slice(0, 2), state_data: stateData });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json<RolloutReport>().rollout_id;
    const done = await finished(id);
    expect(done).toMatchObject({ status: 'succeeded', profile: 'custom' });
    expect(world.standIn.publications.map((p) => p.args[2])).toEqual([JSON.stringify(stateData), JSON.stringify(stateData)]);
    const bodies = [response.body, JSON.stringify(done), (await world.call({ method: 'GET', url: '/v1/rollouts?limit=500', token: TOKENS.acmeRead })).body];
    for (const text of bodies) expect(text).not.toContain('oduflow-rollout-marker-secret');
    const dir = join(world.rolloutWorkspace, 'http', 'acme', id);
    await waitFor(() => !existsSync(join(dir, 'state-data.json')), 10_000, 'the state data is forgotten');
    expect(readFileSync(join(dir, 'binding.json'), 'utf8')).not.toContain('oduflow-rollout-marker-secret');
  });
});

describe('a rollout whose dispatch throws a hostile exception', () => {
  let hostile: ServiceWorld;
  beforeEach(async () => {
    hostile = await startServiceWorld({
      tokens: () => fleetTokens,
      crashAt: (point) => {
        if (point === 'P2') throw new Error(`connect failed: password=${HOSTILE_SECRET} read from ${HOSTILE_PATH}`);
      },
    });
  });
  afterEach(async () => hostile.close());

  it('halts with the fixed stage_exception code, and no response or log line holds the message, the secret or the path', async () => {
    const response = await hostile.call({ method: 'POST', url: '/v1/rollouts', token: TOKENS.acmeAll, key: 'hostile-key', payload: { profile: 'configure', targets: FLEET.slice(0, 3), batch_size: 2 } });
    expect(response.statusCode, response.body).toBe(202);
    const id = response.json<RolloutReport>().rollout_id;
    let shown = '';
    await waitFor(async () => {
      shown = (await hostile.call({ method: 'GET', url: `/v1/rollouts/${id}`, token: TOKENS.acmeRead })).body;
      return (JSON.parse(shown) as RolloutReport).status === 'failed';
    }, 20_000, 'the rollout halted');
    expect(JSON.parse(shown)).toMatchObject({ status: 'failed', halted: 'stage_exception', stages: [{ status: 'failed', error: 'stage_exception' }, { status: 'pending' }] });
    const listed = (await hostile.call({ method: 'GET', url: '/v1/rollouts', token: TOKENS.acmeRead })).body;
    const replay = (await hostile.call({ method: 'POST', url: '/v1/rollouts', token: TOKENS.acmeAll, key: 'hostile-key', payload: { profile: 'configure', targets: FLEET.slice(0, 3), batch_size: 2 } })).body;
    for (const text of [response.body, shown, listed, replay, hostile.logs()]) {
      expect(text).not.toContain(HOSTILE_SECRET);
      expect(text).not.toContain(HOSTILE_PATH);
      expect(text).not.toContain('connect failed');
    }
    expect(hostile.standIn.publications).toEqual([]);
  });
});

describe('rollout metrics', () => {
  it('count rollouts started and finished by status, and POST /v1/rollouts by outcome', async () => {
    const text = (await world.call({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(/oduflow_rollouts_started_total\{origin="request"\} [1-9]/);
    expect(text).toContain('oduflow_rollouts_started_total{origin="resume"} 0');
    expect(text).toMatch(/oduflow_rollouts_finished_total\{status="succeeded"\} [1-9]/);
    expect(text).toMatch(/oduflow_rollouts_finished_total\{status="failed"\} [1-9]/);
    expect(text).toMatch(/oduflow_rollout_admissions_total\{outcome="replayed"\} [1-9]/);
    expect(text).toMatch(/oduflow_rollout_admissions_total\{outcome="key_mismatch"\} [1-9]/);
    expect(text).toContain('oduflow_rollouts_running 0');
  });
});

describe('the OpenAPI document', () => {
  it('documents the rollout routes from their schemas, with the Idempotency-Key and the problem answers, and stays valid', async () => {
    const document = (await world.call({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { operationId?: string; parameters?: { in: string; name: string; required?: boolean }[]; responses: Record<string, unknown> }>>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    }>();
    const validator = new Validator();
    expect((await validator.validate(document)).valid).toBe(true);
    const create = document.paths['/v1/rollouts']?.['post'];
    expect(create?.operationId).toBe('createRollout');
    expect(create?.parameters).toEqual([expect.objectContaining({ in: 'header', name: 'idempotency-key', required: true })]);
    expect(Object.keys(create?.responses ?? {}).sort()).toEqual(['202', '400', '401', '403', '409', '413', '415', '422', '500', '503']);
    expect(document.paths['/v1/rollouts/{id}']?.['get']?.operationId).toBe('getRollout');
    expect(document.paths['/v1/rollouts']?.['get']?.operationId).toBe('listRollouts');
    expect(Object.keys(document.components.schemas['CreateRollout']?.properties ?? {}).sort()).toEqual(['batch_size', 'dry_run', 'max_unresolved', 'profile', 'state_data', 'targets']);
    expect(Object.keys(document.components.schemas['RolloutReport']?.properties ?? {})).toEqual(expect.arrayContaining(['rollout_id', 'status', 'halted', 'counts', 'stages', 'targets']));
  });
});
