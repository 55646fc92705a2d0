import { MasterRunnerError, admit, relayOnce, silentLogger, type AdmissionResult, type MasterDeps, type SaltClient } from '@oduflow/master-runner';
import { createPostgresRecordStore, migratePostgres } from '@oduflow/master-runner/postgres';
import { isBlocking } from '@oduflow/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresCluster } from '../src/postgres.js';

/*
 * The library's admission and outbox relay on the PostgreSQL store, with two
 * master instances (two pools, two Salt clients) sharing one database and
 * taking concurrent, retried admissions for the same and different keys and
 * targets. The Salt side is a fake that counts every publication per request
 * id and JID: each admitted request must be published exactly once, and a
 * target must never hold two unresolved requests.
 */

const CAPABILITIES = {
  protocol: 1,
  module_version: '1.1.0',
  salt_version: '3006.27',
  module_sha256: 'c0ffee00'.repeat(8),
  ready: true,
  reasons: [],
};

const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;

function countingSalt(publications: Map<string, number>): SaltClient {
  return {
    publish: async (_minionId, jid, _fun, args) => {
      const key = `${args[0] ?? ''} ${jid}`;
      publications.set(key, (publications.get(key) ?? 0) + 1);
      await new Promise((resolve) => setImmediate(resolve));
      return { kind: 'acked' };
    },
    call: async (_minionId, fun) => {
      await new Promise((resolve) => setImmediate(resolve));
      return fun === 'oduflow_job.capabilities' ? { kind: 'returned', retcode: 0, ret: CAPABILITIES } : { kind: 'no_return' };
    },
  };
}

let cluster: PostgresCluster;
beforeAll(async () => {
  cluster = await startPostgres();
}, 90_000);
afterAll(async () => {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
  await cluster?.stop();
}, 60_000);

type Attempt = AdmissionResult | { readonly outcome: 'thrown'; readonly code: string };

describe('admission and the outbox relay on PostgreSQL, two master instances', () => {
  it('publishes each admitted request exactly once and never leaves a target with two unresolved requests', async () => {
    const connectionString = await cluster.createDatabase('admission_two_masters');
    await migratePostgres({ connectionString });
    const publications = new Map<string, number>();
    const [storeA, storeB] = [await createPostgresRecordStore({ connectionString }), await createPostgresRecordStore({ connectionString })];
    try {
      const masters: MasterDeps[] = [storeA, storeB].map((store) => ({ store, salt: countingSalt(publications), logger: silentLogger() }));
      const scope = (key: string) => ({ tenant: 'acme', actor: 'ci', action: 'request.create', key });
      // Four targets, two keys each (only one can win its target), every admission sent three times, to both masters, all at once.
      const asks = Array.from({ length: 4 }, (_, t) => [0, 1].map((k) => ({ target: minion(t + 1), key: `order-${t}-${k}` }))).flat();
      const attempt = async (deps: MasterDeps, ask: { target: string; key: string }): Promise<Attempt> => {
        try {
          return await admit(deps, { minionId: ask.target, profile: 'configure' }, { scope: scope(ask.key) });
        } catch (error) {
          if (MasterRunnerError.isInstance(error)) return { outcome: 'thrown', code: error.code };
          throw error;
        }
      };
      const first = await Promise.all(asks.flatMap((ask) => [0, 1, 2].map((i) => attempt(masters[i % 2] as MasterDeps, ask).then((result) => ({ ask, result })))));
      for (const { result } of first) expect(['admitted', 'replayed', 'key_in_flight', 'thrown']).toContain(result.outcome);
      for (const { result } of first) if (result.outcome === 'thrown') expect(result.code).toBe('target_blocked');

      // Each target has exactly one request, bound to exactly one of its keys.
      const records = await storeA.list();
      expect(records).toHaveLength(4);
      expect(new Set(records.map((r) => r.minion_id)).size).toBe(4);
      expect(first.filter(({ result }) => result.outcome === 'admitted')).toHaveLength(4);

      // A retry after the dust settles: the winning key replays its request, the other is refused by the target.
      for (const ask of asks) {
        const again = await attempt(masters[1] as MasterDeps, ask);
        const winner = records.find((r) => r.minion_id === ask.target);
        if (again.outcome === 'replayed') expect(again.record.request_id).toBe(winner?.request_id);
        else expect(again).toEqual({ outcome: 'thrown', code: 'target_blocked' });
      }

      // Both relays at once: every request goes out once, under its own JID.
      const relayed = (await Promise.all(masters.map((deps) => relayOnce(deps, { concurrency: 3 })))).flat();
      expect(relayed.filter((r) => r.outcome === 'published')).toHaveLength(4);
      expect([...publications.values()]).toEqual([1, 1, 1, 1]);
      for (const record of records) expect(publications.get(`${record.request_id} ${record.jid}`)).toBe(1);
      expect((await Promise.all(masters.map((deps) => relayOnce(deps)))).flat()).toEqual([]);
      const after = await storeB.list();
      expect(after.map((r) => r.state)).toEqual(['published', 'published', 'published', 'published']);
      for (let t = 1; t <= 4; t += 1) expect(after.filter((r) => r.minion_id === minion(t) && isBlocking(r))).toHaveLength(1);
      expect(await storeA.countUnresolved()).toEqual({ published: 4 });
    } finally {
      await storeA.close();
      await storeB.close();
    }
  });
});
