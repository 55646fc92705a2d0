import { MasterRunnerError, type AdmissionKey, type RecordStore } from '@oduflow/master-runner';
import { POSTGRES_SCHEMA_VERSION, createPostgresRecordStore, migratePostgres, type PostgresStoreOptions } from '@oduflow/master-runner/postgres';
import { applyEvent, createRequestRecord, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresCluster } from '../src/postgres.js';

/*
 * What the PostgreSQL store promises beyond the shared conformance suite,
 * on a real PostgreSQL 15: the constraints hold when two pools (two master
 * instances) race, the outbox and key claims never hand one thing to two
 * workers, migrations are safe to repeat and to run concurrently, a
 * database at the wrong version is refused, the password stays private,
 * and a master SIGKILLed inside a unit leaves nothing behind.
 */

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const AT = '2026-11-29T10:00:00.000Z';
const T0 = new Date(AT);

const minion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
const requestId = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const jid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();
const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
const later = (ms: number): Date => new Date(T0.getTime() + ms);

function record(n: number, minionId = MINION, jidNumber = n): ProtocolRequestRecord {
  return createRequestRecord({ request_id: requestId(n), minion_id: minionId, profile: 'configure', state_digest: '', jid: jid(jidNumber), at: AT });
}

function reconciled(r: RequestRecord): RequestRecord {
  return applyEvent(r, { type: 'reconciled', at: AT, reason: 'checked on the host', actor: 'ops' });
}

function admissionKey(name: string, content = 'configure'): AdmissionKey {
  return { keyHash: sha256(`key:${name}`), fingerprint: sha256(`content:${content}`), tenant: 'acme', actor: 'deployer' };
}

async function failure(promise: Promise<unknown>): Promise<MasterRunnerError> {
  try {
    await promise;
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a MasterRunnerError, got success');
}

/** Waits for `condition` to hold, polling; fails after the deadline (never a blind sleep). */
async function until(condition: () => boolean | Promise<boolean>, what: string, deadlineMs = 15_000): Promise<void> {
  const started = Date.now();
  while (!(await condition())) {
    if (Date.now() - started > deadlineMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function gate(): { readonly opened: Promise<void>; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

let cluster: PostgresCluster;
let databases = 0;
const opened: RecordStore[] = [];
const scratch: string[] = [];

beforeAll(async () => {
  cluster = await startPostgres();
}, 90_000);
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  for (const dir of scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
});
afterAll(async () => {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
  await cluster?.stop();
}, 60_000);

async function freshDatabase(migrate = true): Promise<{ url: string; name: string }> {
  databases += 1;
  const name = `pgstore_${databases}`;
  const url = await cluster.createDatabase(name);
  if (migrate) await migratePostgres({ connectionString: url });
  return { url, name };
}

async function open(options: PostgresStoreOptions): Promise<RecordStore> {
  const store = await createPostgresRecordStore(options);
  opened.push(store);
  return store;
}

/** Two stores on one database, each with its own pool: two master instances. */
async function twoMasters(options: Partial<PostgresStoreOptions> = {}): Promise<{ a: RecordStore; b: RecordStore; name: string }> {
  const { url, name } = await freshDatabase();
  return { a: await open({ connectionString: url, ...options }), b: await open({ connectionString: url, ...options }), name };
}

const sql = (database: string, statement: string): Promise<string> => cluster.psql(statement, database).then((out) => out.trim());

describe('PostgreSQL store: one blocking record per target, across master instances', () => {
  it('lets exactly one of many dispatch units racing from two pools create a record for one target', async () => {
    const { a, b } = await twoMasters();
    const attempt = (store: RecordStore, n: number): Promise<string> =>
      store.withTarget(MINION, async (unit) => {
        if ((await unit.blockers()).length > 0) return 'blocked';
        return (await unit.create(record(n))).created ? 'created' : 'refused';
      });
    const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => attempt(i % 2 === 0 ? a : b, i + 1)));
    expect(outcomes.filter((o) => o === 'created')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'blocked')).toHaveLength(19);
    expect(await a.list()).toHaveLength(1);
    expect(await b.list({ unresolved: true })).toHaveLength(1);
  });

  it('refuses a second blocking record by constraint when units skip the blockers check, and gives back its JID', async () => {
    const { a, b, name } = await twoMasters();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).withTarget(MINION, (unit) => unit.create(record(i + 1)))),
    );
    const created = outcomes.filter((o) => o.status === 'fulfilled' && o.value.created);
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as unknown] : []));
    expect(created).toHaveLength(1);
    expect(refused).toHaveLength(11);
    const winner = (await a.list())[0];
    for (const error of refused) {
      expect(MasterRunnerError.isInstance(error) && error.code).toBe('target_blocked');
      expect((error as MasterRunnerError).requestId).toBe(winner?.request_id);
    }
    // Nothing of a refused create remains: one JID reserved, one record.
    expect(await sql(name, 'SELECT count(*) FROM oduflow.jids')).toBe('1');
    expect(await sql(name, 'SELECT count(*) FROM oduflow.requests')).toBe('1');
  });

  it('refuses a second blocking record written past the store, straight into the table', async () => {
    const { a, name } = await twoMasters();
    await a.withTarget(MINION, (unit) => unit.create(record(1)));
    const second = record(2);
    const insert = `BEGIN;
      INSERT INTO oduflow.jids (jid, request_id) VALUES ('${second.jid}', '${second.request_id}');
      INSERT INTO oduflow.requests (request_id, minion_id, jid, state, blocking, record)
        VALUES ('${second.request_id}', '${MINION}', '${second.jid}', 'prepared', true, '${JSON.stringify(second)}'::jsonb);
      COMMIT;`;
    await expect(sql(name, insert)).rejects.toThrow(/requests_one_blocking_per_target/);
    expect((await a.list()).map((r) => r.request_id)).toEqual([requestId(1)]);
  });

  it('holds the target row lock for the whole unit: a unit of another pool starts only after the first commits', async () => {
    const { a, b, name } = await twoMasters();
    const release = gate();
    const events: string[] = [];
    const first = a.withTarget(MINION, async (unit) => {
      events.push('a:start');
      await unit.create(record(1));
      await release.opened;
      events.push('a:end');
    });
    await until(() => events.includes('a:start'), 'the first unit to hold the lock');
    const second = b.withTarget(MINION, async (unit) => {
      events.push('b:start');
      return (await unit.blockers()).map((r) => r.request_id);
    });
    await until(async () => (await sql(name, `SELECT count(*) FROM pg_stat_activity WHERE datname = '${name}' AND wait_event_type = 'Lock'`)) === '1', 'the second unit to wait');
    expect(events).toEqual(['a:start']);
    release.open();
    await first;
    expect(await second).toEqual([requestId(1)]);
    expect(events).toEqual(['a:start', 'a:end', 'b:start']);
  });

  it('fails store_busy when a unit waits for a target lock longer than the lock timeout', async () => {
    const { url } = await freshDatabase();
    const a = await open({ connectionString: url });
    const b = await open({ connectionString: url, lockTimeoutMs: 300 });
    const release = gate();
    const holding = gate();
    const first = a.withTarget(MINION, async () => {
      holding.open();
      await release.opened;
    });
    await holding.opened;
    const error = await failure(b.withTarget(MINION, () => Promise.resolve('never')));
    expect(error.code).toBe('store_busy');
    release.open();
    await first;
    expect(await b.withTarget(MINION, () => Promise.resolve('after'))).toBe('after');
  });
});

describe('PostgreSQL store: updates of one request racing from two pools', () => {
  it('loses no update and no history entry, and decides each update at most twice (once more after a lost race)', async () => {
    const { a, b } = await twoMasters();
    await a.withTarget(MINION, (unit) => unit.create(record(1)));
    let decided = 0;
    const bump = (r: RequestRecord): RequestRecord => {
      decided += 1;
      return { ...(r as ProtocolRequestRecord), publish_attempts: (r as ProtocolRequestRecord).publish_attempts + 1 };
    };
    const updates = 30;
    const outcomes = await Promise.all(
      Array.from({ length: updates }, (_, i) => (i % 2 === 0 ? a : b).updateRequest(requestId(1), bump, { event: 'observed', source: 'poller' })),
    );
    expect(outcomes.every((o) => o.changed)).toBe(true);
    expect(((await b.get(requestId(1))) as ProtocolRequestRecord).publish_attempts).toBe(updates);
    expect(decided).toBeGreaterThanOrEqual(updates);
    expect(decided).toBeLessThanOrEqual(2 * updates);
    const history = await a.history(requestId(1));
    // The creation and every update, each with its own number: none lost, none twice.
    expect((history?.entries.length ?? 0) + (history?.dropped ?? 0)).toBe(updates + 1);
    const seqs = history?.entries.map((e) => e.seq) ?? [];
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(seqs[seqs.length - 1]).toBe(updates + 1);
  });

  it('writes nothing, history included, when an update decides the record it was given', async () => {
    const { a, b } = await twoMasters();
    await a.withTarget(MINION, (unit) => unit.create(record(1)));
    const kept = await b.updateRequest(requestId(1), (r) => r, { event: 'observed', source: 'poller' });
    expect(kept.changed).toBe(false);
    expect(await a.history(requestId(1))).toMatchObject({ entries: [{ seq: 1, event: 'created' }], dropped: 0 });
  });
});

describe('PostgreSQL store: prepared statements', () => {
  it('answers statements past the named ones as it answers the named ones (a list with a hundred and twenty different limits)', async () => {
    const { a } = await twoMasters();
    for (let n = 1; n <= 3; n += 1) await a.withTarget(minion(n), (unit) => unit.create(record(n, minion(n))));
    for (let limit = 1; limit <= 120; limit += 1) {
      const page = await a.list({}, { limit });
      expect(page.map((r) => r.request_id)).toEqual([requestId(1), requestId(2), requestId(3)].slice(0, limit));
    }
  });
});

describe('PostgreSQL store: JIDs are unique for ever, across master instances', () => {
  it('hands each JID to exactly one of two pools creating on different targets at once', async () => {
    const { a, b } = await twoMasters();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => [
        a.withTarget(minion(100 + i), (unit) => unit.create(record(100 + i, minion(100 + i), i))),
        b.withTarget(minion(200 + i), (unit) => unit.create(record(200 + i, minion(200 + i), i))),
      ]).flat(),
    );
    for (let i = 0; i < 10; i += 1) {
      const pair = [results[2 * i], results[2 * i + 1]];
      expect(pair.filter((o) => o?.created === true)).toHaveLength(1);
      expect(pair.filter((o) => o?.created === false && o.reason === 'jid_taken')).toHaveLength(1);
      expect((await a.getByJid(jid(i)))?.jid).toBe(jid(i));
    }
    expect(await b.list()).toHaveLength(10);
  });

  it('keeps a JID reserved after its record settles, for every pool', async () => {
    const { a, b } = await twoMasters();
    await a.withTarget(MINION, (unit) => unit.create(record(1)));
    await a.updateRequest(requestId(1), reconciled, { event: 'reconciled', source: 'reconcile' });
    expect(await b.withTarget(minion(7), (unit) => unit.create(record(2, minion(7), 1)))).toEqual({ created: false, reason: 'jid_taken' });
  });
});

describe('PostgreSQL store: outbox claims', () => {
  async function admitted(store: RecordStore, count: number): Promise<void> {
    for (let n = 1; n <= count; n += 1) {
      const created = await store.withTarget(minion(n), (unit) => unit.create(record(n, minion(n)), { outbox: { stateDataJson: '' } }));
      expect(created.created).toBe(true);
    }
  }

  it('never hands one entry to two relays claiming at once from two pools', async () => {
    const { a, b } = await twoMasters();
    await admitted(a, 200);
    // Four relays, two per master, claiming in rounds: in each round all four statements run at
    // once over the same due rows (a relay that waited for the others would prove nothing).
    const relays = [a, b, a, b];
    const claimed: string[][] = relays.map(() => []);
    for (let round = 0; ; round += 1) {
      expect(round).toBeLessThan(100);
      const batches = await Promise.all(relays.map((store) => store.claimOutbox({ limit: 3, now: T0, leaseMs: 60_000 })));
      batches.forEach((batch, i) => claimed[i]?.push(...batch.map((entry) => entry.requestId)));
      if (batches.every((batch) => batch.length === 0)) break;
    }
    const all = claimed.flat();
    expect(new Set(all).size).toBe(all.length);
    expect(all.sort()).toEqual(Array.from({ length: 200 }, (_, i) => requestId(i + 1)).sort());
    for (const mine of claimed) expect(mine.length).toBeGreaterThan(0);
  });

  it('hands a lapsed claim out again, never a live one, and respects a deferral', async () => {
    const { a, b } = await twoMasters();
    await admitted(a, 1);
    const first = await a.claimOutbox({ limit: 10, now: T0, leaseMs: 1_000 });
    expect(first).toEqual([{ requestId: requestId(1), stateDataJson: '', enqueuedAt: AT, attempts: 1 }]);
    expect(await b.claimOutbox({ limit: 10, now: later(999), leaseMs: 1_000 })).toEqual([]);
    expect((await b.claimOutbox({ limit: 10, now: later(1_000), leaseMs: 1_000 })).map((e) => e.attempts)).toEqual([2]);
    await b.deferOutbox(requestId(1), later(10_000));
    expect(await a.claimOutbox({ limit: 10, now: later(9_999), leaseMs: 1_000 })).toEqual([]);
    expect((await a.claimOutbox({ limit: 10, now: later(10_000), leaseMs: 1_000 })).map((e) => e.attempts)).toEqual([3]);
    await a.removeOutbox(requestId(1));
    expect(await b.claimOutbox({ limit: 10, now: later(60_000), leaseMs: 1_000 })).toEqual([]);
  });
});

describe('PostgreSQL store: idempotency keys across master instances', () => {
  it('gives exactly one of many concurrent claims of a new key from two pools the claim', async () => {
    const { a, b } = await twoMasters();
    const key = admissionKey('concurrent');
    const claims = await Promise.all(
      Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? a : b).claimKey(key, { requestId: requestId(i + 1), now: T0, leaseMs: 60_000 })),
    );
    expect(claims.filter((c) => c.kind === 'claimed')).toHaveLength(1);
    expect(claims.filter((c) => c.kind === 'in_flight')).toHaveLength(15);
  });

  it('takes over a lapsed key claim while a live one is in flight, and the lapsed admission loses its create', async () => {
    const { a, b } = await twoMasters();
    const key = admissionKey('lapse');
    expect(await a.claimKey(key, { requestId: requestId(1), now: T0, leaseMs: 1_000 })).toEqual({ kind: 'claimed', requestId: requestId(1) });
    expect(await b.claimKey(key, { requestId: requestId(2), now: later(999), leaseMs: 1_000 })).toEqual({ kind: 'in_flight' });
    expect(await b.claimKey(admissionKey('lapse', 'other'), { requestId: requestId(2), now: later(999), leaseMs: 1_000 })).toEqual({ kind: 'mismatch' });
    expect(await b.claimKey(key, { requestId: requestId(2), now: later(1_000), leaseMs: 1_000 })).toEqual({ kind: 'claimed', requestId: requestId(2) });
    // The admission whose claim lapsed stores nothing; the one that took it over does.
    expect(await a.withTarget(MINION, (unit) => unit.create(record(1), { key, outbox: { stateDataJson: '' } }))).toEqual({ created: false, reason: 'claim_lost' });
    expect(await a.get(requestId(1))).toBeUndefined();
    expect((await b.withTarget(MINION, (unit) => unit.create(record(2), { key, outbox: { stateDataJson: '' } }))).created).toBe(true);
    expect(await a.claimKey(key, { requestId: requestId(3), now: later(5_000), leaseMs: 1_000 })).toEqual({ kind: 'admitted', requestId: requestId(2) });
    expect((await a.claimOutbox({ limit: 5, now: later(5_000), leaseMs: 1_000 })).map((e) => e.requestId)).toEqual([requestId(2)]);
  });
});

describe('PostgreSQL store: migrations', () => {
  it('migrates a new database once and changes nothing when run again', async () => {
    const { url, name } = await freshDatabase(false);
    expect(await migratePostgres({ connectionString: url })).toEqual({ from: 0, to: POSTGRES_SCHEMA_VERSION });
    const tables = await sql(name, "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'oduflow'");
    expect(tables).toBe('idempotency_keys,jids,outbox,request_history,requests,schema_migrations,targets');
    expect(await migratePostgres({ connectionString: url })).toEqual({ from: POSTGRES_SCHEMA_VERSION, to: POSTGRES_SCHEMA_VERSION });
    const versions = Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, i) => i + 1).join(',');
    expect(await sql(name, "SELECT string_agg(version::text, ',' ORDER BY version) FROM oduflow.schema_migrations")).toBe(versions);
    expect(await sql(name, "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = 'oduflow'")).toBe(tables);
  });

  it('brings a version 1 database with records to version 2: their history was not kept, and starts at their next change', async () => {
    const { url, name } = await freshDatabase();
    const before = await open({ connectionString: url });
    expect((await before.withTarget(MINION, (unit) => unit.create(record(1)))).created).toBe(true);
    await before.close();
    // What a release before histories left: the version 1 schema, no history table.
    await sql(name, 'DROP TABLE oduflow.request_history');
    await sql(name, 'DELETE FROM oduflow.schema_migrations WHERE version = 2');
    const refused = await failure(createPostgresRecordStore({ connectionString: url }));
    expect([refused.code, refused.detail]).toEqual(['store_format', 'needs_migration']);
    expect(await migratePostgres({ connectionString: url })).toEqual({ from: 1, to: 2 });
    const store = await open({ connectionString: url });
    expect(await store.get(requestId(1))).toEqual(record(1));
    expect(await store.history(requestId(1))).toEqual({ entries: [], dropped: 0 });
    await store.updateRequest(requestId(1), reconciled, { event: 'reconciled', source: 'reconcile' });
    expect((await store.history(requestId(1)))?.entries).toEqual([
      { seq: 1, at: AT, from_state: 'prepared', to_state: 'reconciled', event: 'reconciled', source: 'reconcile', observed: null, reason_code: null },
    ]);
  });

  it('migrates once when several migrators run at the same time', async () => {
    const { url, name } = await freshDatabase(false);
    const runs = await Promise.all(Array.from({ length: 4 }, () => migratePostgres({ connectionString: url })));
    expect(runs.filter((r) => r.from === 0)).toHaveLength(1);
    expect(runs.every((r) => r.to === POSTGRES_SCHEMA_VERSION)).toBe(true);
    expect(await sql(name, 'SELECT count(*) FROM oduflow.schema_migrations')).toBe(String(POSTGRES_SCHEMA_VERSION));
    const store = await open({ connectionString: url });
    expect(await store.list()).toEqual([]);
  });

  it('refuses to open a database that was never migrated, and creates nothing in it', async () => {
    const { url, name } = await freshDatabase(false);
    const error = await failure(createPostgresRecordStore({ connectionString: url }));
    expect([error.code, error.detail]).toEqual(['store_format', 'needs_migration']);
    expect(error.message).toContain('oduflow-master migrate');
    expect(await sql(name, "SELECT count(*) FROM pg_namespace WHERE nspname = 'oduflow'")).toBe('0');
  });

  it('refuses a database migrated by a newer release, and migrate leaves it untouched', async () => {
    const { url, name } = await freshDatabase();
    const newer = POSTGRES_SCHEMA_VERSION + 1;
    await sql(name, `INSERT INTO oduflow.schema_migrations (version, description) VALUES (${newer}, 'from the future')`);
    const opening = await failure(createPostgresRecordStore({ connectionString: url }));
    expect([opening.code, opening.detail]).toEqual(['store_format', 'unknown_format']);
    const migrating = await failure(migratePostgres({ connectionString: url }));
    expect([migrating.code, migrating.detail]).toEqual(['store_format', 'unknown_format']);
    expect(await sql(name, 'SELECT max(version) FROM oduflow.schema_migrations')).toBe(String(newer));
  });
});

describe('PostgreSQL store: the password and what operators see', () => {
  function passwordFile(content: string, mode = 0o600): string {
    const dir = mkdtempSync(join(tmpdir(), 'oduflow-pg-secret-'));
    scratch.push(dir);
    const path = join(dir, 'password');
    writeFileSync(path, content, { mode });
    chmodSync(path, mode);
    return path;
  }

  const withoutPassword = (url: string): string => url.replace(`:${encodeURIComponent(cluster.password)}@`, '@');

  it('connects with the password from a private file and shows the URL without it', async () => {
    const { url, name } = await freshDatabase();
    const store = await open({ connectionString: withoutPassword(url), passwordFile: passwordFile(`${cluster.password}\n`) });
    expect(store.location).toBe(`postgres://${cluster.user}@127.0.0.1:${cluster.port}/${name}`);
    expect(await store.list()).toEqual([]);
  });

  it('never shows a password given in the URL, as userinfo or as a parameter', async () => {
    const { url, name } = await freshDatabase();
    const store = await open({ connectionString: url });
    expect(store.location).toBe(`postgres://${cluster.user}@127.0.0.1:${cluster.port}/${name}`);
    const viaParameter = await open({ connectionString: `${withoutPassword(url)}?password=${encodeURIComponent(cluster.password)}&application_name=x` });
    expect(viaParameter.location).toBe(`postgres://${cluster.user}@127.0.0.1:${cluster.port}/${name}?application_name=x`);
    expect(viaParameter.location).not.toContain(cluster.password);
  });

  it('refuses a password file that is not private, or not there, or empty', async () => {
    const { url } = await freshDatabase();
    const connectionString = withoutPassword(url);
    const readable = await failure(createPostgresRecordStore({ connectionString, passwordFile: passwordFile(cluster.password, 0o644) }));
    expect(readable.code).toBe('credentials_insecure');
    expect(readable.message).toContain('PostgreSQL password file');
    const target = passwordFile(cluster.password);
    const link = join(dirname(target), 'link');
    symlinkSync(target, link);
    expect((await failure(createPostgresRecordStore({ connectionString, passwordFile: link }))).code).toBe('credentials_insecure');
    expect((await failure(createPostgresRecordStore({ connectionString, passwordFile: join(dirname(target), 'missing') }))).code).toBe('credentials_unreadable');
    expect((await failure(createPostgresRecordStore({ connectionString, passwordFile: passwordFile('') }))).code).toBe('credentials_unreadable');
    expect((await failure(createPostgresRecordStore({ connectionString, passwordFile: 'relative/password' }))).code).toBe('config_invalid');
    const both = await failure(createPostgresRecordStore({ connectionString: url, passwordFile: target }));
    expect(both.code).toBe('config_invalid');
    for (const error of [readable, both]) expect(`${error.message} ${JSON.stringify(error)}`).not.toContain(cluster.password);
  });

  it('reports a wrong password, an unknown database, a closed port and a bad URL without echoing the password', async () => {
    const wrongPassword = 'not-the-password-9f8e7d';
    const { url } = await freshDatabase();
    const cases: Array<[string, string, string]> = [
      [url.replace(encodeURIComponent(cluster.password), wrongPassword), 'store_io', wrongPassword],
      [cluster.urlFor('no_such_database'), 'store_io', cluster.password],
      [url.replace(`:${cluster.port}/`, ':1/'), 'store_io', cluster.password],
      [`postgres//oduflow:${wrongPassword}@127.0.0.1/x`, 'config_invalid', wrongPassword],
    ];
    for (const [connectionString, code, secret] of cases) {
      // One at a time: a second promise made up front could reject before anything awaits it (an unhandled rejection).
      for (const attempt of [() => createPostgresRecordStore({ connectionString }), () => migratePostgres({ connectionString })]) {
        const error = await failure(attempt());
        expect(error.code).toBe(code);
        expect(error.cause).toBeUndefined();
        expect(`${error.message} ${error.stack ?? ''} ${JSON.stringify(error)}`).not.toContain(secret);
        expect(error.message).not.toContain(cluster.password);
      }
    }
  });
});

describe('PostgreSQL store: records at rest', () => {
  it('reports a row whose record does not validate as store_corrupt for that record, in every read, never skipping it', async () => {
    const { a, name } = await twoMasters();
    await a.withTarget(MINION, (unit) => unit.create(record(1)));
    await a.withTarget(minion(2), (unit) => unit.create(record(2, minion(2))));
    await sql(name, `UPDATE oduflow.requests SET record = jsonb_set(record, '{profile}', '"leaked-secret-value"') WHERE request_id = '${requestId(1)}'`);
    const reads: Array<() => Promise<unknown>> = [
      () => a.get(requestId(1)),
      () => a.getByJid(jid(1)),
      () => a.list(),
      () => a.withTarget(MINION, (unit) => unit.blockers()),
      () => a.updateRequest(requestId(1), reconciled, { event: 'reconciled', source: 'reconcile' }),
      async () => {
        for await (const _page of a.scan({}, { pageSize: 1 })) {
          // Each page is one read; draining them is the call.
        }
      },
    ];
    for (const read of reads) {
      const error = await failure(read());
      expect(error.code).toBe('store_corrupt');
      expect(error.requestId).toBe(requestId(1));
      expect(error.message).toContain(requestId(1));
      expect(error.message).not.toContain('leaked-secret-value');
    }
    expect((await a.get(requestId(2)))?.request_id).toBe(requestId(2));
  });

  it('reports a row whose indexed columns disagree with its record as store_corrupt', async () => {
    const { a, name } = await twoMasters();
    await a.withTarget(MINION, (unit) => unit.create(record(1)));
    await sql(name, `UPDATE oduflow.requests SET blocking = false WHERE request_id = '${requestId(1)}'`);
    expect((await failure(a.get(requestId(1)))).code).toBe('store_corrupt');
  });
});

describe('PostgreSQL store: a unit and its connection', () => {
  it('runs the store calls made inside a unit on its own connection, so a pool of one never deadlocks, and they see its writes', async () => {
    const { url } = await freshDatabase();
    const store = await open({ connectionString: url, poolSize: 1, lockTimeoutMs: 5_000 });
    await store.withTarget(minion(9), (unit) => unit.create(record(9, minion(9))));
    const seen = await store.withTarget(MINION, async (unit) => {
      const created = await unit.create(record(1));
      const [got, listed, updated] = await Promise.all([
        store.get(requestId(1)),
        store.list({ unresolved: true }),
        store.updateRequest(requestId(9), reconciled, { event: 'reconciled', source: 'reconcile' }),
      ]);
      return { created: created.created, got: got?.request_id, listed: listed.map((r) => r.request_id), state: updated.after.state };
    });
    expect(seen).toEqual({ created: true, got: requestId(1), listed: [requestId(1), requestId(9)], state: 'reconciled' });
    expect((await store.get(requestId(9)))?.state).toBe('reconciled');
  });

  it('runs a unit nested in another on the same connection, and the outer unit stays usable from inside it', async () => {
    const { url } = await freshDatabase();
    const store = await open({ connectionString: url, poolSize: 1, lockTimeoutMs: 5_000 });
    const seen = await store.withTarget(MINION, async (outer) => {
      await outer.create(record(1));
      return store.withTarget(minion(2), async (inner) => {
        await inner.create(record(2, minion(2)));
        const [outerBlockers, innerBlockers] = [await outer.blockers(), await inner.blockers()];
        return [outerBlockers.map((r) => r.request_id), innerBlockers.map((r) => r.request_id)];
      });
    });
    expect(seen).toEqual([[requestId(1)], [requestId(2)]]);
    expect((await store.list()).map((r) => r.request_id)).toEqual([requestId(1), requestId(2)]);
  });

  it('undoes everything a unit wrote, nested calls included, when its work throws', async () => {
    const { url } = await freshDatabase();
    const store = await open({ connectionString: url });
    await store.withTarget(minion(9), (unit) => unit.create(record(9, minion(9))));
    const boom = new Error('changed my mind');
    await expect(
      store.withTarget(MINION, async (unit) => {
        await unit.create(record(1));
        await store.updateRequest(requestId(9), reconciled, { event: 'reconciled', source: 'reconcile' });
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await store.get(requestId(1))).toBeUndefined();
    expect((await store.get(requestId(9)))?.state).toBe('prepared');
    expect((await store.withTarget(MINION, (unit) => unit.create(record(2, MINION, 1)))).created).toBe(true);
  });

  it('leaves nothing when a master is SIGKILLed inside a create unit: no record, no JID, no key binding, no outbox entry, no lock', async () => {
    const { url, name } = await freshDatabase();
    const store = await open({ connectionString: url, lockTimeoutMs: 10_000 });
    const key = admissionKey('killed');
    expect((await store.claimKey(key, { requestId: requestId(1), now: T0, leaseMs: 60_000 })).kind).toBe('claimed');
    const child = spawn(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), 'support', 'postgres-store-child.mjs'), JSON.stringify({ connectionString: url, record: record(1), key, outbox: { stateDataJson: '' } })], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const ended = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)));
    try {
      await until(() => stdout.includes('HOLDING\n') || child.exitCode !== null, 'the child to hold its unit');
      expect(stdout, stderr).toContain('HOLDING');
      // It holds the target lock with everything written, uncommitted.
      expect(await sql(name, `SELECT count(*) FROM pg_stat_activity WHERE datname = '${name}' AND state = 'idle in transaction'`)).toBe('1');
    } finally {
      child.kill('SIGKILL');
    }
    expect(await ended).toBe('SIGKILL');
    // The server ends the dead session and aborts its transaction: the lock is free at once.
    const outcome = await store.withTarget(MINION, async (unit) => ({ blockers: await unit.blockers(), created: await unit.create(record(2, MINION, 1)) }));
    expect(outcome.blockers).toEqual([]);
    expect(outcome.created.created).toBe(true);
    expect(await store.get(requestId(1))).toBeUndefined();
    expect(await sql(name, `SELECT count(*) FROM oduflow.outbox WHERE request_id = '${requestId(1)}'`)).toBe('0');
    // The key is still claimed by the dead admission (it was never bound): in flight until its lease lapses.
    expect(await store.claimKey(key, { requestId: requestId(3), now: later(1_000), leaseMs: 60_000 })).toEqual({ kind: 'in_flight' });
    expect(await store.claimKey(key, { requestId: requestId(3), now: later(60_000), leaseMs: 60_000 })).toEqual({ kind: 'claimed', requestId: requestId(3) });
  });
});
