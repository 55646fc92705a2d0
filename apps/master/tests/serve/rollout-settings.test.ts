import { isRequestId } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { rolloutServeConfig } from '../../src/serve/rollout-config.js';
import { rolloutIdOfKey } from '../../src/serve/rollout-id.js';
import { ACME_A, TOKENS, startServiceWorld } from './support/service-world.js';

describe('the rollout id of an Idempotency-Key', () => {
  it('is a canonical version 8 UUID, the same for the same key and scope, and another for another tenant, actor or key', () => {
    const id = rolloutIdOfKey({ tenant: 'acme', actor: 'ci', key: 'k-1' });
    expect(isRequestId(id)).toBe(true);
    expect(id[14]).toBe('8');
    expect(rolloutIdOfKey({ tenant: 'acme', actor: 'ci', key: 'k-1' })).toBe(id);
    const others = [
      rolloutIdOfKey({ tenant: 'globex', actor: 'ci', key: 'k-1' }),
      rolloutIdOfKey({ tenant: 'acme', actor: 'ops', key: 'k-1' }),
      rolloutIdOfKey({ tenant: 'acme', actor: 'ci', key: 'k-2' }),
      // No concatenation ambiguity: the fields are encoded apart.
      rolloutIdOfKey({ tenant: 'acme', actor: 'cik', key: '-1' }),
    ];
    expect(new Set([id, ...others]).size).toBe(5);
  });
});

describe('serve’s rollout settings', () => {
  it('put the workspace where the rollout command puts it: rollouts/ beside a file store, else ODUFLOW_ROLLOUT_WORKSPACE or the flag', () => {
    expect(rolloutServeConfig({}, { ODUFLOW_STORE: '/srv/oduflow/master' }).workspace).toBe('/srv/oduflow/rollouts');
    expect(rolloutServeConfig({}, {}).workspace).toBe('/var/lib/oduflow/rollouts');
    expect(rolloutServeConfig({}, { ODUFLOW_STORE: 'postgres://db/oduflow' }).workspace).toBe('/var/lib/oduflow/rollouts');
    expect(rolloutServeConfig({}, { ODUFLOW_ROLLOUT_WORKSPACE: '/data/rollouts' }).workspace).toBe('/data/rollouts');
    expect(rolloutServeConfig({ rolloutWorkspace: '/flag/rollouts' }, { ODUFLOW_ROLLOUT_WORKSPACE: '/data/rollouts' }).workspace).toBe('/flag/rollouts');
  });

  it('take the batch timings from flags or the environment, with the library’s defaults', () => {
    expect(rolloutServeConfig({}, {})).toMatchObject({ stageTimeoutMs: 900_000, pollIntervalMs: 2_000, concurrency: 8 });
    expect(rolloutServeConfig({ rolloutConcurrency: '16' }, { ODUFLOW_ROLLOUT_POLL_INTERVAL_MS: '500', ODUFLOW_ROLLOUT_STAGE_TIMEOUT_MS: '60000' })).toMatchObject({
      stageTimeoutMs: 60_000,
      pollIntervalMs: 500,
      concurrency: 16,
    });
  });

  it('refuse a relative workspace or a timing out of range as a configuration error', () => {
    for (const [flags, env] of [
      [{ rolloutWorkspace: 'rollouts' }, {}],
      [{}, { ODUFLOW_ROLLOUT_CONCURRENCY: '65' }],
      [{}, { ODUFLOW_ROLLOUT_POLL_INTERVAL_MS: 'fast' }],
      [{ rolloutStageTimeout: '0' }, {}],
    ] as const) {
      expect(() => rolloutServeConfig(flags, env)).toThrow(expect.objectContaining({ code: 'config_invalid' }));
    }
  });
});

describe('a service started without a rollout workspace', () => {
  it('answers every rollout route 503, and its other routes as usual', async () => {
    const world = await startServiceWorld({ rollouts: undefined });
    try {
      const post = await world.call({ method: 'POST', url: '/v1/rollouts', token: TOKENS.acmeAll, key: 'k', payload: { profile: 'configure', targets: [ACME_A] } });
      const get = await world.call({ method: 'GET', url: '/v1/rollouts', token: TOKENS.acmeRead });
      expect([post.statusCode, get.statusCode]).toEqual([503, 503]);
      expect(post.json()).toMatchObject({ code: 'unavailable' });
      expect((await world.call({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      expect(world.standIn.publications).toEqual([]);
    } finally {
      await world.close();
    }
  });
});
