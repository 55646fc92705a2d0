import { admissionKey } from '@oduflow/master-runner';
import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { setTimeout as pause } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { startPostgres, type PostgresCluster } from '../../../../packages/test-harness/src/postgres.js';
import { EXIT } from '../../src/exit-codes.js';
import { assertBuilt } from '../support/cli.js';
import { getJson, metricValue, postRequest, startPgInstances, type PgInstances } from './support/pg-instances.js';
import type { ServeProcess } from './support/serve-process.js';
import { waitFor } from './support/service-world.js';
import { timelineViolations, type TimedPublication } from './support/target-timeline.js';

/*
 * Two real `serve` processes on one PostgreSQL 15 database and one salt-api
 * stand-in, hammered by many concurrent clients: hundreds of operations,
 * each an Idempotency-Key with its content, sent to either instance, some by
 * two clients at once, some also sent with other content under the same key,
 * some aborted by the client mid-flight and retried with the same key
 * against the other instance, and every refusal that stores nothing
 * (target_blocked, key_in_flight) retried with backoff, as a real client
 * would. The targets: most end `succeeded`, one `failed`, two end `unknown`
 * (they stay blocked for ever: exactly one request each may ever be
 * published there), one answers its capability call "not ready" (recorded
 * rejected at admission, never published, never blocking).
 *
 * Asserted from three independent views — what the clients were answered,
 * what the stand-in received (with its clock), what the database holds:
 * exactly one publication per admitted request and none for anything else,
 * every key resolves to one request id whatever instance and retry answered,
 * no record nobody was answered about (nothing admitted behind a client's
 * back and lost), and at no moment two requests holding one target
 * (support/target-timeline.ts, whose own tests show it catches overlaps).
 *
 * The seed is printed; HAMMER_SEED replays its plan (keys, targets,
 * duplicates, conflicting contents, which instance first) — the
 * interleaving is the machine's. HAMMER_OPS sets the number of operations
 * (default 300).
 */

const OPERATIONS = Number(process.env['HAMMER_OPS'] ?? 300);
const CLIENTS = 32;
const TARGETS = { succeeded: 15, failed: 1, unknown: 2, notReady: 1 };
/** Share of operations sent by a second client at the same time, and with other content under the same key. */
const DUPLICATED = 0.3;
const CONFLICTING = 0.06;
/** Share of attempts the client aborts after 0–15 ms. */
const ABORTED = 0.15;
/** A client gives up an operation after this many target_blocked answers in a row (with backoff between). */
const BLOCKED_TRIES = 14;
/**
 * The clients take no new operation after this long (the ones in hand are finished), so a loaded machine makes
 * the run smaller, not longer; at least MIN_ADMITTED requests must have been admitted for the run to count.
 */
const CLIENT_BUDGET_MS = 40_000;
const MIN_ADMITTED = 100;

const SEED = Number(process.env['HAMMER_SEED'] ?? Math.floor(Math.random() * 2 ** 31));

/** mulberry32: a small seeded PRNG, so a failing run can be replayed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

interface Operation {
  readonly key: string;
  readonly body: { readonly minion_id: string; readonly profile: string };
}

interface Answer {
  readonly key: string;
  readonly profile: string;
  readonly status: number;
  readonly requestId?: string;
  readonly state?: string;
  readonly replayed: boolean;
  readonly code?: string;
}

let cluster: PostgresCluster;
let standIn: SaltApiStandIn;
let world: PgInstances;
let instances: ServeProcess[];
let addresses: string[];
const publications: TimedPublication[] = [];
/** Run in reverse by afterAll: whatever beforeAll got to start. */
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  assertBuilt();
  cluster = await startPostgres();
  cleanups.push(() => cluster.stop());
  standIn = await startSaltApiStandIn();
  cleanups.push(() => standIn.close());
  standIn.onPublication = (p) => publications.push({ requestId: String(p.args[0]), minionId: p.minionId, at: p.at });
  const total = TARGETS.succeeded + TARGETS.failed + TARGETS.unknown + TARGETS.notReady;
  world = await startPgInstances(cluster, standIn, {
    database: `hammer_${process.pid}`,
    minions: total,
    env: { ODUFLOW_POLL_WALK_INTERVAL_MS: '500', ODUFLOW_LOG_LEVEL: 'info' },
  });
  cleanups.push(() => world.close());
  const m = world.minions;
  const failing = new Set(m.slice(TARGETS.succeeded, TARGETS.succeeded + TARGETS.failed));
  const unknown = new Set(m.slice(TARGETS.succeeded + TARGETS.failed, total - TARGETS.notReady));
  const notReady = new Set(m.slice(total - TARGETS.notReady));
  standIn.resultOf = (id) =>
    failing.has(id) ? { status: 'failed', passed: 57, total: 60 } : unknown.has(id) ? { status: 'unknown', passed: 0, total: 0 } : standIn.result;
  const capabilities = standIn.capabilities;
  standIn.capabilities = (id) =>
    notReady.has(id)
      ? { retcode: 0, ret: { protocol: 1, module_version: '1.1.0', salt_version: '3006.27', module_sha256: 'c0ffee00'.repeat(8), ready: false, reasons: ['multiprocessing'] } }
      : capabilities(id);
  instances = [world.serve(), world.serve()];
  addresses = await Promise.all(instances.map((p) => p.address));
}, 90_000);

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
}, 60_000);

function plan(random: () => number, minions: readonly string[]): { senders: { op: Operation; first: number }[] } {
  const senders: { op: Operation; first: number }[] = [];
  for (let i = 0; i < OPERATIONS; i += 1) {
    // Round-robin over the targets (every kind of target is hit), the order shuffled below.
    const minionId = minions[i % minions.length] as string;
    const op: Operation = { key: `op-${SEED}-${i}`, body: { minion_id: minionId, profile: 'configure' } };
    const first = random() < 0.5 ? 0 : 1;
    senders.push({ op, first });
    if (random() < DUPLICATED) senders.push({ op, first: 1 - first });
    if (random() < CONFLICTING) senders.push({ op: { ...op, body: { ...op.body, profile: 'production' } }, first: random() < 0.5 ? 0 : 1 });
  }
  // Shuffled, so duplicates of one key are in flight at the same time only by chance, as in life.
  for (let i = senders.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [senders[i], senders[j]] = [senders[j] as { op: Operation; first: number }, senders[i] as { op: Operation; first: number }];
  }
  return { senders };
}

describe('two serve instances on one PostgreSQL database, hammered', () => {
  it('publishes every admitted request exactly once, nothing else, one request per key, never two holding a target', async () => {
    const random = prng(SEED);
    const { senders } = plan(random, world.minions);
    const answers: Answer[] = [];
    const counts = { attempts: 0, aborted: 0, networkErrors: 0, gaveUp: 0 };
    const abortedKeys = new Set<string>();
    const gaveUpKeys = new Set<string>();
    const orphans: string[] = [];
    const startedAt = Date.now();

    /** One client's retries of one operation until it has an answer that settles it. */
    const send = async ({ op, first }: { op: Operation; first: number }): Promise<void> => {
      let instance = first;
      let blocked = 0;
      for (;;) {
        counts.attempts += 1;
        const controller = new AbortController();
        const abortAfter = random() < ABORTED ? Math.floor(random() * 15) : undefined;
        const timer = abortAfter === undefined ? undefined : setTimeout(() => controller.abort(), abortAfter);
        let response: Response | undefined;
        let payload: Record<string, unknown> = {};
        try {
          response = await postRequest(addresses[instance] as string, op.key, op.body, controller.signal);
          payload = (await response.json()) as Record<string, unknown>;
        } catch {
          response = undefined;
          if (controller.signal.aborted) {
            counts.aborted += 1;
            abortedKeys.add(op.key);
          }
          else counts.networkErrors += 1;
        } finally {
          clearTimeout(timer);
        }
        if (response !== undefined) {
          const answer: Answer = {
            key: op.key,
            profile: op.body.profile,
            status: response.status,
            replayed: response.headers.get('idempotent-replayed') === 'true',
            ...(typeof payload['request_id'] === 'string' ? { requestId: payload['request_id'], state: String(payload['state']) } : {}),
            ...(typeof payload['code'] === 'string' ? { code: payload['code'] } : {}),
          };
          answers.push(answer);
          if (answer.status === 202 || answer.code === 'key_mismatch') return;
          if (answer.code === 'target_blocked') {
            blocked += 1;
            if (blocked >= BLOCKED_TRIES) {
              counts.gaveUp += 1;
              gaveUpKeys.add(op.key);
              return;
            }
          } else if (answer.code !== 'key_in_flight') {
            throw new Error(`unexpected answer ${answer.status} ${answer.code ?? ''} for ${op.key}`);
          }
        }
        // A client's backoff before its retry (growing with the target_blocked answers), then the other instance.
        await pause(5 + Math.floor(random() * 10 * Math.min(2 ** blocked, 16)));
        instance = 1 - instance;
      }
    };

    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENTS }, async () => {
        while (next < senders.length && Date.now() - startedAt < CLIENT_BUDGET_MS) {
          const sender = senders[next] as { op: Operation; first: number };
          next += 1;
          await send(sender);
        }
      }),
    );
    const clientsDoneMs = Date.now() - startedAt;

    // Let both instances finish: nothing left to publish or to settle.
    let records: ProtocolRequestRecord[] = [];
    await waitFor(
      async () => {
        records = await world.records();
        return (await world.outboxSize()) === 0 && records.every((r) => !['prepared', 'publishing', 'published', 'running'].includes(r.state));
      },
      30_000,
      'every admitted request published and settled',
    );

    // 1. Every key resolves to one request id, whichever instance or retry answered it.
    const idsByKey = new Map<string, Set<string>>();
    for (const a of answers) {
      if (a.status !== 202 || a.requestId === undefined) continue;
      const ids = idsByKey.get(a.key) ?? new Set<string>();
      ids.add(a.requestId);
      idsByKey.set(a.key, ids);
    }
    const multiple = [...idsByKey].filter(([, ids]) => ids.size !== 1);
    expect(multiple, `seed ${SEED}`).toEqual([]);
    // Other content under a key is answered 202 only when it is the content the key is bound to, and 422 is
    // answered only for keys that were really sent with two contents. (A 422 can come from a claim of the other
    // content still in flight that is then released — its target was blocked — so the key may end bound to this one.)
    const boundProfile = new Map<string, string>();
    for (const a of answers) if (a.status === 202) boundProfile.set(a.key, a.profile);
    const twoContents = new Set(senders.filter((s) => s.op.body.profile !== 'configure').map((s) => s.op.key));
    for (const a of answers) {
      if (a.status === 202) expect(a.profile, `seed ${SEED}: ${a.key}`).toBe(boundProfile.get(a.key));
      if (a.code === 'key_mismatch') expect(twoContents.has(a.key), `seed ${SEED}: ${a.key}`).toBe(true);
    }

    // 2. The database holds exactly the requests admitted under the clients' keys, each bound to its key; a request
    // nobody was answered about may exist only behind a key whose client aborted an attempt and then gave up.
    const keyRows = new Map(
      (await world.keys()).map((k) => [k.keyHash, k] as const),
    );
    const hashOf = (key: string): string =>
      admissionKey({ tenant: 'fleet', actor: 'hammer', action: 'request.create', key }, { minionId: '', profile: 'configure', stateDigest: '' }).keyHash;
    const keysSent = new Set(senders.map((s) => s.op.key));
    const boundTo = new Map<string, string>();
    for (const key of keysSent) {
      const row = keyRows.get(hashOf(key));
      if (row?.state === 'bound') boundTo.set(key, row.requestId);
      const answeredIds = idsByKey.get(key);
      if (answeredIds !== undefined) expect(row, `seed ${SEED}: key ${key}`).toMatchObject({ state: 'bound', requestId: [...answeredIds][0] });
      else if (row?.state === 'bound') orphans.push(key);
    }
    for (const key of orphans) expect(abortedKeys.has(key) && gaveUpKeys.has(key), `seed ${SEED}: ${key} admitted without an answer`).toBe(true);
    expect(new Set(records.map((r) => r.request_id)), `seed ${SEED}`).toEqual(new Set(boundTo.values()));
    expect(keyRows.size, 'no key left claimed or foreign').toBe(boundTo.size);
    const admitted = records.filter((r) => r.state !== 'rejected');
    const rejected = records.filter((r) => r.state === 'rejected');
    expect(admitted.length, 'enough load to find races').toBeGreaterThanOrEqual(Math.min(MIN_ADMITTED, OPERATIONS / 2));

    // 3. Exactly one publication per admitted request, under its own JID; none for a rejected one, none for anything else.
    const perRequest = new Map<string, number>();
    for (const p of publications) perRequest.set(p.requestId, (perRequest.get(p.requestId) ?? 0) + 1);
    for (const r of admitted) {
      expect(perRequest.get(r.request_id), `seed ${SEED}: publications of ${r.request_id}`).toBe(1);
      expect(standIn.publicationsUnder(r.jid)).toBe(1);
      expect(r).toMatchObject({ publish_attempts: 1 });
    }
    for (const r of rejected) expect(perRequest.get(r.request_id)).toBeUndefined();
    expect(publications.length, `seed ${SEED}`).toBe(admitted.length);
    expect(standIn.publicationRequests).toBe(admitted.length);

    // 4. At no moment two requests holding one target, and no publication while another request held its target.
    expect(timelineViolations(records, publications), `seed ${SEED}`).toEqual([]);
    expect(await world.doublyBlockedTargets()).toEqual([]);

    // Each target ended as its minion answered: the unknown ones stay blocked by their one request, the others are free.
    const statesOf = (ids: readonly string[]): Set<string> => new Set(records.filter((r) => ids.includes(r.minion_id)).map((r) => r.state));
    const m = world.minions;
    const [succeeding, failing, unknown, notReady] = [
      m.slice(0, TARGETS.succeeded),
      m.slice(TARGETS.succeeded, TARGETS.succeeded + TARGETS.failed),
      m.slice(TARGETS.succeeded + TARGETS.failed, m.length - TARGETS.notReady),
      m.slice(m.length - TARGETS.notReady),
    ];
    expect(statesOf(succeeding)).toEqual(new Set(['succeeded']));
    expect(statesOf(failing)).toEqual(new Set(['failed']));
    expect(statesOf(unknown)).toEqual(new Set(['unknown']));
    expect(statesOf(notReady)).toEqual(new Set(['rejected']));
    for (const id of unknown) {
      const held = records.filter((r) => r.minion_id === id);
      expect(held.length, 'an unknown target never gets a second request').toBeLessThanOrEqual(1);
      const target = await getJson(addresses[1] as string, `/v1/targets/${id}`);
      expect(target).toMatchObject({ blocked: held.length === 1, blockers: held.map((r): unknown => expect.objectContaining({ request_id: r.request_id })) });
    }

    // Both instances did real work: each admitted and published a share.
    const published = await Promise.all(addresses.map((a) => metricValue(a, 'oduflow_publications_total', { outcome: 'published' })));
    const admittedBy = await Promise.all(addresses.map((a) => metricValue(a, 'oduflow_admissions_total', { outcome: 'admitted' })));
    expect(published.reduce((x, y) => x + y, 0)).toBe(admitted.length);
    for (const n of [...published, ...admittedBy]) expect(n).toBeGreaterThan(0);

    const tally = (what: (a: Answer) => boolean): number => answers.filter(what).length;
    const pubAt = new Map(publications.map((p) => [p.requestId, p.at]));
    const settledOnes = admitted.filter((r) => r.state !== 'unknown');
    const median = (values: number[]): string => {
      const sorted = [...values].sort((x, y) => x - y);
      return `median ${sorted[Math.floor(sorted.length / 2)] ?? 0} ms, p90 ${sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))] ?? 0} ms`;
    };
    const toPublication = median(admitted.map((r) => (pubAt.get(r.request_id) ?? 0) - Date.parse(r.created_at)));
    const toRecord = median(settledOnes.map((r) => Date.parse(r.updated_at) - (pubAt.get(r.request_id) ?? 0)));
    console.log(
      `[hammer] seed ${SEED}: ${OPERATIONS} operations (${next} of ${senders.length} senders started), ${CLIENTS} clients, 2 instances; ` +
        `${counts.attempts} POSTs (${counts.aborted} aborted by the client, ${counts.networkErrors} network errors), ` +
        `${records.length} requests (${admitted.length} admitted and published once each, ${rejected.length} rejected, never published); ` +
        `answers: 202 new ${tally((a) => a.status === 202 && !a.replayed)}, 202 replayed ${tally((a) => a.replayed)}, ` +
        `409 target_blocked ${tally((a) => a.code === 'target_blocked')}, 409 key_in_flight ${tally((a) => a.code === 'key_in_flight')}, ` +
        `422 key_mismatch ${tally((a) => a.code === 'key_mismatch')}; ${counts.gaveUp} operations given up while blocked ` +
        `(${orphans.length} of them admitted by an attempt their client had aborted); ` +
        `publications by instance ${published.join('/')}, admissions ${admittedBy.join('/')}; ` +
        `admission to publication ${toPublication}, publication to terminal record ${toRecord}; ` +
        `clients done in ${(clientsDoneMs / 1000).toFixed(1)} s, settled in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`,
    );

    for (const p of instances) p.child.kill('SIGTERM');
    for (const p of instances) expect((await p.exited).code).toBe(EXIT.ok);
  }, 110_000);
});
