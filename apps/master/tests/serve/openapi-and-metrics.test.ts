import { Validator } from '@seriousme/openapi-schema-validator';
import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEMS, PROBLEM_CODES } from '../../src/serve/problems.js';
import { ACME_A, TOKENS, startServiceWorld, waitFor, type ServiceWorld } from './support/service-world.js';

let world: ServiceWorld;

beforeAll(async () => {
  world = await startServiceWorld();
});
afterAll(async () => {
  await world.close();
});

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document generated from the route schemas', async () => {
    const response = await world.call({ method: 'GET', url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    const document = response.json<Record<string, unknown>>();
    const validator = new Validator();
    const result = await validator.validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('documents every route, its security, the record schema and the problem answers', async () => {
    const document = (await world.call({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<
        string,
        Record<string, { security?: unknown; parameters?: { in: string; name: string; required?: boolean }[]; responses: Record<string, { content?: Record<string, unknown> }>; requestBody?: unknown }>
      >;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }>; securitySchemes: Record<string, unknown> };
    }>();
    expect(Object.keys(document.paths).sort()).toEqual(
      [
        '/healthz',
        '/metrics',
        '/readyz',
        '/v1/events',
        '/v1/requests',
        '/v1/requests/{id}',
        '/v1/requests/{id}/history',
        '/v1/requests/{id}/reconcile',
        '/v1/rollouts',
        '/v1/rollouts/{id}',
        '/v1/targets/{minion_id}',
      ].sort(),
    );
    const events = document.paths['/v1/events']?.['get'];
    expect(events?.security).toEqual([{ bearer: [] }]);
    expect(Object.keys(events?.responses['200']?.content ?? {})).toEqual(['text/event-stream']);
    const create = document.paths['/v1/requests']?.['post'];
    expect(create?.security).toEqual([{ bearer: [] }]);
    expect(create?.requestBody).toBeDefined();
    expect(create?.parameters).toEqual([expect.objectContaining({ in: 'header', name: 'idempotency-key', required: true })]);
    expect(Object.keys(create?.responses ?? {}).sort()).toEqual(['202', '400', '401', '403', '409', '413', '415', '422', '500', '503']);
    expect(Object.keys(create?.responses['422']?.content ?? {})).toEqual(['application/problem+json']);
    expect(document.components.securitySchemes['bearer']).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(Object.keys(document.components.schemas['RequestRecord']?.properties ?? {})).toContain('state_digest');
    expect(Object.keys(document.components.schemas['CreateRequest']?.properties ?? {}).sort()).toEqual(['minion_id', 'profile', 'state_data']);
    const history = document.paths['/v1/requests/{id}/history']?.['get'];
    expect(history?.security).toEqual([{ bearer: [] }]);
    expect(Object.keys(history?.responses ?? {}).sort()).toEqual(['200', '400', '401', '403', '404', '500']);
    expect(Object.keys(document.components.schemas['RequestHistory']?.properties ?? {}).sort()).toEqual(['dropped', 'entries', 'kept', 'request_id']);
    expect(Object.keys(document.components.schemas['HistoryEntry']?.properties ?? {}).sort()).toEqual(
      ['at', 'event', 'from_state', 'observed', 'reason_code', 'seq', 'source', 'to_state'],
    );
  });
});

describe('the problem table', () => {
  it('gives every code a 4xx or 5xx status and a title', () => {
    for (const code of PROBLEM_CODES) {
      expect(PROBLEMS[code].status).toBeGreaterThanOrEqual(400);
      expect(PROBLEMS[code].title.length).toBeGreaterThan(0);
    }
  });
});

describe('GET /metrics', () => {
  it('exposes admissions, publications, polls, unresolved requests, latencies and process metrics', async () => {
    world.standIn.returnEvents = false;
    const response = await world.call({ method: 'POST', url: '/v1/requests', token: TOKENS.acmeAll, key: 'metrics-key', payload: { minion_id: ACME_A, profile: 'configure' } });
    expect(response.statusCode, response.body).toBe(202);
    const record = response.json<ProtocolRequestRecord>();
    await waitFor(async () => (await world.store.get(record.request_id))?.state === 'succeeded', 10_000, 'polled to succeeded');
    await world.call({ method: 'POST', url: '/v1/requests', token: TOKENS.acmeAll, key: 'metrics-key', payload: { minion_id: ACME_A, profile: 'configure' } });

    const metrics = await world.call({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(String(metrics.headers['content-type'])).toContain('text/plain');
    const text = metrics.body;
    expect(text).toContain('oduflow_admissions_total{outcome="admitted"} 1');
    expect(text).toContain('oduflow_admissions_total{outcome="replayed"} 1');
    expect(text).toContain('oduflow_publications_total{outcome="published"} 1');
    expect(text).toMatch(/oduflow_polls_total\{outcome="committed"\} [1-9]/);
    expect(text).toMatch(/oduflow_unresolved_requests\{state="published"\} 0/);
    expect(text).toContain('oduflow_poll_sweep_duration_seconds_count');
    expect(text).toContain('oduflow_http_request_duration_seconds_bucket{le="0.005",route="/v1/requests",method="POST",status="202"}');
    expect(text).toContain('oduflow_event_to_record_seconds_count');
    expect(text).toContain('process_cpu_user_seconds_total');
    // Labels never carry ids.
    expect(text).not.toContain(record.request_id);
    expect(text).not.toContain(ACME_A);
  });
});
