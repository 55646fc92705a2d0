import { createPostgresRecordStore, migratePostgres } from '@oduflow/master-runner/postgres';
import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GOOD_CAPABILITIES } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { startPostgres, type PostgresCluster } from '../../../../packages/test-harness/src/postgres.js';
import type { ServiceOptions } from '../../src/serve/service.js';
import { ACME_A, ACME_B, TOKENS, startServiceWorld, waitFor, type ServiceWorld, type StoreOpener } from './support/service-world.js';

/*
 * The Idempotency-Key cases of issue 10, end to end over HTTP, on both
 * stores (the file store, and PostgreSQL 15 with a fresh migrated database
 * per case), counted at the salt-api stand-in: exactly one publication
 * however often the same admission is sent.
 */

let cluster: PostgresCluster;
let databases = 0;

beforeAll(async () => {
  cluster = await startPostgres();
}, 90_000);
afterAll(async () => {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
  await cluster?.stop();
}, 60_000);

const postgresStore: StoreOpener = async () => {
  databases += 1;
  const connectionString = await cluster.createDatabase(`idempotency_${process.pid}_${databases}`);
  await migratePostgres({ connectionString });
  return createPostgresRecordStore({ connectionString, lockTimeoutMs: 10_000 });
};

const STORES: readonly (readonly [string, StoreOpener | undefined])[] = [
  ['the file store', undefined],
  ['PostgreSQL', postgresStore],
];

describe.each(STORES)('on %s', (_store, openStore) => {
  let world: ServiceWorld;
  const start = (overrides: Partial<ServiceOptions> = {}): Promise<ServiceWorld> => startServiceWorld(overrides, openStore);

  beforeEach(async () => {
    world = await start();
  });
  afterEach(async () => {
    await world.close();
  });

  const body = { minion_id: ACME_A, profile: 'configure' };

  function post(key: string | undefined, payload: Record<string, unknown> = body, token: string = TOKENS.acmeAll, headers: Record<string, string> = {}) {
    return world.call({ method: 'POST', url: '/v1/requests', token, ...(key === undefined ? {} : { key }), headers, payload });
  }

  async function settled(requestId: string): Promise<void> {
    await waitFor(async () => (await world.store.get(requestId))?.state === 'succeeded', 10_000, 'succeeded');
  }

  describe('Idempotency-Key', () => {
    it('is required: a POST without one is 400 and asks Salt nothing', async () => {
      const response = await post(undefined);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toMatchObject({ code: 'invalid_idempotency_key', reason: 'missing' });
      expect(world.standIn.calls).toEqual([]);
      expect(await world.store.list()).toEqual([]);
    });

    it.each([
      ['empty', '', 'empty'],
      ['an empty sf-string', '""', 'empty'],
      ['256 characters', 'k'.repeat(256), 'too_long'],
      ['a quoted string of 256 characters', `"${'k'.repeat(256)}"`, 'too_long'],
      ['a bare key with a space', 'two words', 'malformed'],
      ['an unterminated sf-string', '"abc', 'malformed'],
      ['an sf-string with a bad escape', '"a\\nb"', 'malformed'],
    ])('is 400 when it is %s', async (_label, key, reason) => {
      const response = await post(key);
      expect(response.statusCode).toBe(400);
      expect(response.json()).toMatchObject({ code: 'invalid_idempotency_key', reason });
      expect(world.standIn.calls).toEqual([]);
    });

    it('accepts 255 characters, and a quoted key means the same as its unquoted content', async () => {
      const long = await post('k'.repeat(255));
      expect(long.statusCode).toBe(202);
      await settled(long.json<ProtocolRequestRecord>().request_id);
      const bare = await post('order-42', { ...body, minion_id: ACME_B });
      const quoted = await post('"order-42"', { ...body, minion_id: ACME_B });
      expect(bare.statusCode).toBe(202);
      expect(quoted.statusCode).toBe(202);
      expect(quoted.headers['idempotent-replayed']).toBe('true');
      expect(quoted.json<ProtocolRequestRecord>().request_id).toBe(bare.json<ProtocolRequestRecord>().request_id);
    });

    it('with the same body answers the same request, says it is a replay, and Salt sees exactly one publication', async () => {
      const first = await post('same-key');
      expect(first.statusCode).toBe(202);
      const record = first.json<ProtocolRequestRecord>();
      expect(first.headers['idempotent-replayed']).toBeUndefined();

      const again = await post('same-key');
      expect(again.statusCode).toBe(202);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.headers['location']).toBe(`/v1/requests/${record.request_id}`);
      expect(again.json<ProtocolRequestRecord>().request_id).toBe(record.request_id);

      await settled(record.request_id);
      // A replay after the request settled shows where it is now, and still publishes nothing.
      const later = await post('same-key');
      expect(later.headers['idempotent-replayed']).toBe('true');
      expect(later.json()).toMatchObject({ request_id: record.request_id, state: 'succeeded' });
      expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
      expect(world.standIn.publications).toHaveLength(1);
      expect(await world.store.list()).toHaveLength(1);
    });

    it('with another body is 422 key_mismatch, and nothing new is recorded', async () => {
      const first = await post('reused-key');
      expect(first.statusCode).toBe(202);
      await settled(first.json<ProtocolRequestRecord>().request_id);
      const other = await post('reused-key', { ...body, profile: 'production' });
      expect(other.statusCode).toBe(422);
      expect(other.json()).toMatchObject({ code: 'key_mismatch' });
      const elsewhere = await post('reused-key', { ...body, minion_id: ACME_B });
      expect(elsewhere.statusCode).toBe(422);
      expect(await world.store.list()).toHaveLength(1);
      expect(world.standIn.publications).toHaveLength(1);
    });

    it('is scoped by tenant and actor: the same key from another token is another request', async () => {
      const a = await post('shared-key', body, TOKENS.acmeAll);
      await settled(a.json<ProtocolRequestRecord>().request_id);
      const b = await post('shared-key', body, TOKENS.acmeDispatch);
      expect(b.statusCode).toBe(202);
      expect(b.headers['idempotent-replayed']).toBeUndefined();
      expect(b.json<ProtocolRequestRecord>().request_id).not.toBe(a.json<ProtocolRequestRecord>().request_id);
    });

    it('is 409 key_in_flight while the first admission with that key is still being admitted', async () => {
      let release: () => void = () => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      world.standIn.capabilities = () => ({ after: held, reply: { retcode: 0, ret: GOOD_CAPABILITIES } });
      const first = post('concurrent-key');
      await waitFor(() => world.standIn.calls.some((c) => c.fun === 'oduflow_job.capabilities'), 5_000, 'the first admission asks for capabilities');
      const second = await post('concurrent-key');
      expect(second.statusCode).toBe(409);
      expect(second.json()).toMatchObject({ code: 'key_in_flight' });
      expect(second.headers['retry-after']).toBe('1');
      release();
      const done = await first;
      expect(done.statusCode).toBe(202);
      const record = done.json<ProtocolRequestRecord>();
      await settled(record.request_id);
      expect(world.standIn.publicationsOf(record.request_id)).toBe(1);
      // Once admitted, the same key replays.
      expect((await post('concurrent-key')).headers['idempotent-replayed']).toBe('true');
    });

    it('is released when the minion could not be asked, so a retry with the same key is a new admission', async () => {
      world.standIn.capabilities = () => ({ noReturn: true });
      expect((await post('retry-key')).statusCode).toBe(503);
      world.standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
      const retried = await post('retry-key');
      expect(retried.statusCode).toBe(202);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
    });

    it('does not affect a GET: an Idempotency-Key on a read is ignored', async () => {
      const created = await post('read-key');
      const id = created.json<ProtocolRequestRecord>().request_id;
      for (const key of ['read-key', '', 'k'.repeat(300)]) {
        const read = await world.call({ method: 'GET', url: `/v1/requests/${id}`, token: TOKENS.acmeRead, headers: { 'idempotency-key': key } });
        expect(read.statusCode).toBe(200);
        expect(read.headers['idempotent-replayed']).toBeUndefined();
        const list = await world.call({ method: 'GET', url: '/v1/requests', token: TOKENS.acmeRead, headers: { 'idempotency-key': key } });
        expect(list.statusCode).toBe(200);
      }
      expect(await world.store.list()).toHaveLength(1);
    });
  });

  describe('key retention', () => {
    it('forgets a key after its retention, never its request: the same key then starts a new request', async () => {
      await world.close();
      world = await start({ keyRetentionMs: 300 });
      const first = await post('expiring-key');
      const firstId = first.json<ProtocolRequestRecord>().request_id;
      await settled(firstId);
      const expired = async (): Promise<boolean> => /oduflow_idempotency_keys_expired_total [1-9]/.test(await world.service.metrics.registry.metrics());
      await waitFor(expired, 10_000, 'the key expired');
      const again = await post('expiring-key');
      expect(again.statusCode).toBe(202);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(again.json<ProtocolRequestRecord>().request_id).not.toBe(firstId);
      expect(await world.store.get(firstId)).toMatchObject({ state: 'succeeded' });
    });
  });
});
