import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GOOD_CAPABILITIES } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { ACME_A, ACME_B, GLOBEX_A, NOBODYS, TOKENS, startServiceWorld, waitFor, type ServiceWorld } from './support/service-world.js';

let world: ServiceWorld;

beforeEach(async () => {
  world = await startServiceWorld();
});
afterEach(async () => {
  await world.close();
});

const PROBLEM = 'application/problem+json';
let keys = 0;
const freshKey = (): string => `key-${process.pid}-${(keys += 1)}`;

async function admit(minionId: string, token: string = TOKENS.acmeAll, body: Record<string, unknown> = {}) {
  return world.call({ method: 'POST', url: '/v1/requests', token, key: freshKey(), payload: { minion_id: minionId, profile: 'configure', ...body } });
}

function expectProblem(response: { statusCode: number; headers: Record<string, unknown>; json: () => unknown }, status: number, code: string): Record<string, unknown> {
  expect(response.statusCode).toBe(status);
  expect(String(response.headers['content-type'])).toContain(PROBLEM);
  const body = response.json() as Record<string, unknown>;
  expect(body).toMatchObject({ type: `https://oduflow.dev/problems/${code}`, status, code });
  expect(typeof body['title']).toBe('string');
  expect(typeof body['detail']).toBe('string');
  expect(body['instance']).toMatch(/^urn:uuid:[0-9a-f-]{36}$/);
  return body;
}

async function settled(requestId: string): Promise<ProtocolRequestRecord> {
  await waitFor(async () => (await world.store.get(requestId))?.state === 'succeeded', 10_000, `request ${requestId} succeeded`);
  return (await world.store.get(requestId)) as ProtocolRequestRecord;
}

describe('authentication and scopes', () => {
  it.each([
    ['no Authorization header', undefined],
    ['an unknown token', 'odf_not-a-token-of-this-service'],
    ['another scheme', 'Basic YWxhZGRpbjpvcGVuc2VzYW1l'],
    ['an empty bearer', 'Bearer '],
  ])('answers 401 with a Bearer challenge for %s', async (_label, authorization) => {
    const response = await world.call({ method: 'GET', url: '/v1/requests', headers: authorization === undefined ? {} : { authorization } });
    expectProblem(response, 401, 'unauthorized');
    expect(response.headers['www-authenticate']).toBe('Bearer realm="oduflow"');
  });

  it('answers 403 naming the scope a token lacks', async () => {
    const response = await admit(ACME_A, TOKENS.acmeRead);
    expect(expectProblem(response, 403, 'forbidden')).toMatchObject({ required_scope: 'dispatch' });
    const reconcile = await world.call({
      method: 'POST',
      url: '/v1/requests/6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f/reconcile',
      token: TOKENS.acmeDispatch,
      payload: { reason: 'x' },
    });
    expect(expectProblem(reconcile, 403, 'forbidden')).toMatchObject({ required_scope: 'reconcile' });
  });

  it('needs dispatch:custom for a custom request, on top of dispatch', async () => {
    const response = await admit(ACME_A, TOKENS.acmeDispatch, { profile: 'custom', state_data: { s: { 'test.nop': [] } } });
    expect(expectProblem(response, 403, 'forbidden')).toMatchObject({ required_scope: 'dispatch:custom' });
    expect(world.standIn.calls).toEqual([]);
  });

  it('keeps health, readiness, metrics and the OpenAPI document open', async () => {
    for (const url of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
      expect((await world.call({ method: 'GET', url })).statusCode, url).toBe(200);
    }
  });
});

describe('tenant isolation', () => {
  it('refuses with 403 a dispatch to a target the tenant does not own, asking Salt nothing', async () => {
    expectProblem(await admit(GLOBEX_A, TOKENS.acmeAll), 403, 'target_not_owned');
    expectProblem(await admit(NOBODYS, TOKENS.acmeAll), 403, 'target_not_owned');
    expect(world.standIn.calls).toEqual([]);
  });

  it("answers 404 for another tenant's request and target, as for ones that do not exist", async () => {
    const admitted = await admit(GLOBEX_A, TOKENS.globexAll);
    expect(admitted.statusCode).toBe(202);
    const id = admitted.json<{ request_id: string }>().request_id;
    expectProblem(await world.call({ method: 'GET', url: `/v1/requests/${id}`, token: TOKENS.acmeAll }), 404, 'not_found');
    expectProblem(await world.call({ method: 'GET', url: '/v1/requests/00000000-0000-4000-8000-000000000001', token: TOKENS.acmeAll }), 404, 'not_found');
    expectProblem(await world.call({ method: 'GET', url: `/v1/targets/${GLOBEX_A}`, token: TOKENS.acmeAll }), 404, 'not_found');
    expectProblem(
      await world.call({ method: 'POST', url: `/v1/requests/${id}/reconcile`, token: TOKENS.acmeAll, payload: { reason: 'not yours' } }),
      404,
      'not_found',
    );
    expectProblem(await world.call({ method: 'GET', url: `/v1/requests/${id}/history`, token: TOKENS.acmeAll }), 404, 'not_found');
    expectProblem(await world.call({ method: 'GET', url: '/v1/requests/00000000-0000-4000-8000-000000000001/history', token: TOKENS.acmeAll }), 404, 'not_found');
    // Its own tenant sees it.
    expect((await world.call({ method: 'GET', url: `/v1/requests/${id}`, token: TOKENS.globexAll })).statusCode).toBe(200);
    expect((await world.call({ method: 'GET', url: `/v1/requests/${id}/history`, token: TOKENS.globexAll })).statusCode).toBe(200);
  });

  it("never lists another tenant's requests, even when asked by minion id", async () => {
    expect((await admit(GLOBEX_A, TOKENS.globexAll)).statusCode).toBe(202);
    expect((await admit(ACME_A, TOKENS.acmeAll)).statusCode).toBe(202);
    const mine = (await world.call({ method: 'GET', url: '/v1/requests', token: TOKENS.acmeAll })).json<{ items: { minion_id: string }[] }>();
    expect(mine.items.map((r) => r.minion_id)).toEqual([ACME_A]);
    const theirs = await world.call({ method: 'GET', url: `/v1/requests?minion_id=${GLOBEX_A}`, token: TOKENS.acmeAll });
    expect(theirs.json()).toEqual({ items: [], next_cursor: null });
  });
});

describe('POST /v1/requests', () => {
  it('answers 202 with the record and a Location, and the relay publishes it to its receipt', async () => {
    const response = await admit(ACME_A);
    expect(response.statusCode).toBe(202);
    const record = response.json<ProtocolRequestRecord>();
    expect(record).toMatchObject({ protocol: 1, minion_id: ACME_A, profile: 'configure', state: 'prepared', jid: expect.stringMatching(/^[0-9]{20}$/) as unknown });
    expect(response.headers['location']).toBe(`/v1/requests/${record.request_id}`);
    expect(response.headers['idempotent-replayed']).toBeUndefined();
    expect(await settled(record.request_id)).toMatchObject({ passed: 60, total: 60, jid: record.jid });
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
  });

  it('answers 202 for a minion that is not ready: the record says rejected and why, nothing is published', async () => {
    world.standIn.capabilities = () => ({ retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['multiprocessing'] } });
    const response = await admit(ACME_A);
    expect(response.statusCode).toBe(202);
    expect(response.json()).toMatchObject({ state: 'rejected', reason: { code: 'not_ready', readiness: ['multiprocessing'] } });
    expect(world.standIn.publications).toEqual([]);
    // Terminal and not blocking: the next request to the target is admitted.
    expect((await admit(ACME_A)).statusCode).toBe(202);
  });

  it('answers 409 target_blocked naming the blocker the tenant may see', async () => {
    world.standIn.returnEvents = false;
    world.standIn.status = (_args, _minion, simulated) => ('ret' in simulated ? { ...simulated, ret: { ...(simulated.ret as object), status: 'running', passed: 0, total: 0 } } : simulated);
    const first = (await admit(ACME_A)).json<ProtocolRequestRecord>();
    const body = expectProblem(await admit(ACME_A), 409, 'target_blocked');
    expect(body).toMatchObject({ blocking_request_id: first.request_id });
    expect(String(body['detail'])).toContain(first.request_id);
  });

  it('answers 503 with Retry-After when the minion does not answer, recording nothing', async () => {
    world.standIn.capabilities = () => ({ noReturn: true });
    const response = await admit(ACME_A);
    expect(expectProblem(response, 503, 'minion_unreachable')).toMatchObject({ reason: 'no_return' });
    expect(response.headers['retry-after']).toBe('5');
    expect(await world.store.list()).toEqual([]);
  });

  it('answers 422 no_target for a minion id without an accepted key', async () => {
    world.standIn.capabilities = () => ({ noTarget: true });
    expectProblem(await admit(ACME_A), 422, 'no_target');
    expect(await world.store.list()).toEqual([]);
  });

  it.each([
    ['invalid high data', { profile: 'custom', state_data: { s: 'not a state' } }, 'invalid_high_data'],
    ['a reserved key', { profile: 'custom', state_data: { s: { 'test.nop': [{ __env__: 'x' }] } } }, 'forbidden_key'],
    ['a fraction', { profile: 'custom', state_data: { s: { 'test.nop': [{ n: 1.5 }] } } }, 'unsupported_json_value'],
    ['state data with a fixed profile', { profile: 'configure', state_data: { s: { 'test.nop': [] } } }, 'invalid_high_data'],
    ['a custom request without state data', { profile: 'custom' }, 'invalid_high_data'],
  ])('answers 422 invalid_state_data with the protocol code for %s', async (_label, body, reason) => {
    const response = await admit(ACME_A, TOKENS.acmeAll, body);
    expect(expectProblem(response, 422, 'invalid_state_data')).toMatchObject({ reason });
    expect(world.standIn.calls).toEqual([]);
  });

  it.each([
    ['a malformed minion id', { minion_id: 'client-nope', profile: 'configure' }],
    ['an unknown profile', { minion_id: ACME_A, profile: 'everything' }],
    ['an unknown field', { minion_id: ACME_A, profile: 'configure', request_id: '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f' }],
    ['state data that is not an object', { minion_id: ACME_A, profile: 'custom', state_data: ['x'] }],
  ])('answers 400 invalid_request for %s', async (_label, payload) => {
    const response = await world.call({ method: 'POST', url: '/v1/requests', token: TOKENS.acmeAll, key: freshKey(), payload });
    expectProblem(response, 400, 'invalid_request');
  });

  it('answers 400 for a body that is not JSON without quoting it, 415 for another media type, 413 for a huge body', async () => {
    const secret = 'never-echo-this-body';
    const broken = await world.call({
      method: 'POST',
      url: '/v1/requests',
      token: TOKENS.acmeAll,
      key: freshKey(),
      headers: { 'content-type': 'application/json' },
      payload: `{"minion_id": ${secret}`,
    });
    expectProblem(broken, 400, 'invalid_request');
    expect(broken.body).not.toContain(secret);
    const text = await world.call({ method: 'POST', url: '/v1/requests', token: TOKENS.acmeAll, key: freshKey(), headers: { 'content-type': 'text/plain' }, payload: 'x' });
    expectProblem(text, 415, 'unsupported_media_type');
    const huge = await world.call({
      method: 'POST',
      url: '/v1/requests',
      token: TOKENS.acmeAll,
      key: freshKey(),
      payload: { minion_id: ACME_A, profile: 'custom', state_data: { s: { 'test.nop': [{ pad: 'x'.repeat(300 * 1024) }] } } },
    });
    expectProblem(huge, 413, 'payload_too_large');
    expect(world.logs()).not.toContain(secret);
  });
});

describe('a custom request', () => {
  it('is admitted with dispatch:custom, shows only its digest and never echoes its state data in a response or a log line', async () => {
    const marker = 'state-data-marker-7f3a';
    const stateData = { [`${marker}-id`]: { 'cmd.run': [{ name: `echo ${marker}` }] } };
    const response = await admit(ACME_B, TOKENS.acmeAll, { profile: 'custom', state_data: stateData });
    expect(response.statusCode).toBe(202);
    const record = response.json<ProtocolRequestRecord>();
    expect(record.state_digest).toMatch(/^[0-9a-f]{64}$/);
    const done = await settled(record.request_id);
    // The minion got it exactly once, canonical.
    expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
    expect(world.standIn.publications[0]?.args[2]).toBe(JSON.stringify(stateData));
    const views = [
      response.body,
      (await world.call({ method: 'GET', url: `/v1/requests/${record.request_id}`, token: TOKENS.acmeAll })).body,
      (await world.call({ method: 'GET', url: '/v1/requests', token: TOKENS.acmeAll })).body,
      (await world.call({ method: 'GET', url: '/metrics' })).body,
    ];
    for (const body of views) expect(body).not.toContain(marker);
    expect(done.state).toBe('succeeded');
    const logs = world.logs();
    expect(logs).toContain(record.request_id);
    expect(logs).not.toContain(marker);
  });
});

describe('GET /v1/requests and /v1/requests/{id}', () => {
  it('pages through the tenant’s requests by cursor, in request-id order, filtered by state and target', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const response = await admit(i % 2 === 0 ? ACME_A : ACME_B);
      const id = response.json<{ request_id: string }>().request_id;
      ids.push(id);
      await settled(id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const url: string = `/v1/requests?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`;
      const page = (await world.call({ method: 'GET', url, token: TOKENS.acmeRead })).json<{ items: { request_id: string }[]; next_cursor: string | null }>();
      expect(page.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.items.map((r) => r.request_id));
      cursor = page.next_cursor;
      pages += 1;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].sort());

    const onB = (await world.call({ method: 'GET', url: `/v1/requests?minion_id=${ACME_B}&state=succeeded,failed`, token: TOKENS.acmeRead })).json<{
      items: { minion_id: string }[];
    }>();
    expect(onB.items).toHaveLength(2);
    expect(onB.items.every((r) => r.minion_id === ACME_B)).toBe(true);
    const none = (await world.call({ method: 'GET', url: '/v1/requests?state=prepared', token: TOKENS.acmeRead })).json<unknown>();
    expect(none).toEqual({ items: [], next_cursor: null });
  });

  it('answers 400 for a bad cursor, state, limit or unknown query parameter', async () => {
    for (const query of ['cursor=Li4vZXRj', 'cursor=not*base64', 'state=done', 'limit=0', 'limit=501', 'states=prepared']) {
      expectProblem(await world.call({ method: 'GET', url: `/v1/requests?${query}`, token: TOKENS.acmeRead }), 400, 'invalid_request');
    }
    expectProblem(await world.call({ method: 'GET', url: '/v1/requests/not-an-id!', token: TOKENS.acmeRead }), 400, 'invalid_request');
  });
});

describe('GET /v1/requests/{id}/history', () => {
  it('shows each committed change with its time and source: admission, relay, then the minion’s answer', async () => {
    const record = (await admit(ACME_A)).json<ProtocolRequestRecord>();
    const done = await settled(record.request_id);
    const response = await world.call({ method: 'GET', url: `/v1/requests/${record.request_id}/history`, token: TOKENS.acmeRead });
    expect(response.statusCode).toBe(200);
    const history = response.json<{ request_id: string; kept: boolean; dropped: number; entries: Record<string, unknown>[] }>();
    expect(history).toMatchObject({ request_id: record.request_id, kept: true, dropped: 0 });
    expect(history.entries.slice(0, 3)).toEqual([
      { seq: 1, at: record.created_at, from_state: null, to_state: 'prepared', event: 'created', source: 'admission', observed: null, reason_code: null },
      expect.objectContaining({ seq: 2, from_state: 'prepared', to_state: 'publishing', event: 'intent_recorded', source: 'relay' }),
      expect.objectContaining({ seq: 3, from_state: 'publishing', event: 'publish_acked', source: 'relay' }),
    ]);
    const last = history.entries.at(-1);
    expect(last).toMatchObject({ to_state: 'succeeded', event: 'observed', observed: 'succeeded', at: done.updated_at });
    // The return arrives on the event stream or by a poll, whichever commits first; either names itself.
    expect(['event_stream', 'poller']).toContain(last?.['source']);
    expect(history.entries.map((e) => e['seq'])).toEqual(history.entries.map((_, i) => i + 1));
  });

  it('needs a token: 401 without one, and 400 for an id that is not one', async () => {
    expectProblem(await world.call({ method: 'GET', url: '/v1/requests/6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f/history' }), 401, 'unauthorized');
    expectProblem(await world.call({ method: 'GET', url: '/v1/requests/not%20an%20id/history', token: TOKENS.acmeRead }), 400, 'invalid_request');
  });
});

describe('GET /v1/targets/{minion_id}', () => {
  it('says whether the target is blocked and by which request', async () => {
    expect((await world.call({ method: 'GET', url: `/v1/targets/${ACME_A}`, token: TOKENS.acmeRead })).json()).toEqual({
      minion_id: ACME_A,
      blocked: false,
      blockers: [],
    });
    world.standIn.returnEvents = false;
    world.standIn.status = (_args, _minion, simulated) => ('ret' in simulated ? { ...simulated, ret: { ...(simulated.ret as object), status: 'running', passed: 0, total: 0 } } : simulated);
    const record = (await admit(ACME_A)).json<ProtocolRequestRecord>();
    const target = (await world.call({ method: 'GET', url: `/v1/targets/${ACME_A}`, token: TOKENS.acmeRead })).json<{ blocked: boolean; blockers: { request_id: string }[] }>();
    expect(target.blocked).toBe(true);
    expect(target.blockers.map((b) => b.request_id)).toEqual([record.request_id]);
    expectProblem(await world.call({ method: 'GET', url: '/v1/targets/client-x', token: TOKENS.acmeRead }), 400, 'invalid_request');
  });
});

describe('POST /v1/requests/{id}/reconcile', () => {
  async function blockedRequest(): Promise<ProtocolRequestRecord> {
    world.standIn.returnEvents = false;
    world.standIn.status = (_args, _minion, simulated) => ('ret' in simulated ? { ...simulated, ret: { ...(simulated.ret as object), status: 'unknown', passed: 0, total: 0 } } : simulated);
    const record = (await admit(ACME_A)).json<ProtocolRequestRecord>();
    await waitFor(async () => (await world.store.get(record.request_id))?.state === 'unknown', 10_000, 'unknown');
    return record;
  }

  it('reconciles with the token’s actor and the reason given, and unblocks the target', async () => {
    const record = await blockedRequest();
    const response = await world.call({
      method: 'POST',
      url: `/v1/requests/${record.request_id}/reconcile`,
      token: TOKENS.acmeReconcile,
      payload: { reason: 'checked on the host: the state did not run' },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ state: 'reconciled', reconciliation: { actor: 'acme-oncall', reason: 'checked on the host: the state did not run' } });
    const history = await world.call({ method: 'GET', url: `/v1/requests/${record.request_id}/history`, token: TOKENS.acmeRead });
    expect(history.json<{ entries: unknown[] }>().entries.at(-1)).toMatchObject({ from_state: 'unknown', to_state: 'reconciled', event: 'reconciled', source: 'reconcile' });
    // The operator's reason and actor stay on the record; the history holds closed codes only.
    expect(history.body).not.toContain('checked on the host');
    expect(history.body).not.toContain('acme-oncall');
    expect((await world.call({ method: 'GET', url: `/v1/targets/${ACME_A}`, token: TOKENS.acmeRead })).json()).toMatchObject({ blocked: false });
  });

  it('needs a reason: missing, empty or with control characters is 400, and nothing changes', async () => {
    const record = await blockedRequest();
    for (const payload of [{}, { reason: '' }, { reason: 'two\nlines' }]) {
      expectProblem(
        await world.call({ method: 'POST', url: `/v1/requests/${record.request_id}/reconcile`, token: TOKENS.acmeReconcile, payload }),
        400,
        'invalid_request',
      );
    }
    expect((await world.store.get(record.request_id))?.state).toBe('unknown');
  });

  it('answers 409 illegal_transition for a settled request', async () => {
    const record = (await admit(ACME_A)).json<ProtocolRequestRecord>();
    await settled(record.request_id);
    const response = await world.call({ method: 'POST', url: `/v1/requests/${record.request_id}/reconcile`, token: TOKENS.acmeAll, payload: { reason: 'too late' } });
    expectProblem(response, 409, 'illegal_transition');
  });
});

describe('readiness', () => {
  it('is 503 when salt-api refuses the login, naming why, while the process stays live', async () => {
    world.standIn.loginReply = () => ({ status: 401, body: '{"status":401}' });
    const refused = await world.call({ method: 'GET', url: '/readyz' });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toEqual({ ready: false, store: 'ok', salt_api: 'auth_failed', draining: false });
    expect((await world.call({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
  });
});

describe('problems', () => {
  it('answers an unknown route with a 404 problem', async () => {
    expectProblem(await world.call({ method: 'GET', url: '/v2/nothing' }), 404, 'not_found');
  });

  it('logs one access line per exchange, with the route and status and without headers or bodies', async () => {
    await admit(ACME_A);
    const lines = world
      .logs()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l['msg'] === 'http');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ method: 'POST', route: '/v1/requests', path: '/v1/requests', status: 202, tenant: 'acme', token_id: 'acme-all' });
    expect(lines[0]?.['http_id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines[0]).not.toHaveProperty('headers');
    expect(JSON.stringify(lines[0])).not.toContain(TOKENS.acmeAll);
  });
});
