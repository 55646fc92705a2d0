import pg from 'pg';
import { createPostgresRecordStore } from '../../src/postgres/postgres-record-store.js';
import { migratePostgres } from '../../src/postgres/migrate.js';
import type { RecordStore } from '../../src/record-store.js';
import { encodeRecord } from '../../src/record-codec.js';
// The throwaway cluster of the tests (fsync on, 127.0.0.1, SCRAM). Bundled by path: test-harness depends on this package, not the reverse.
import { startPostgres, type PostgresCluster } from '../../../test-harness/src/postgres.js';
import { publishedRecord } from './fleet.js';

/*
 * The poll-sweep bench's backlog in the PostgreSQL store: a database per
 * run, migrated by migratePostgres, and N published requests on N minion
 * ids inserted in bulk (the targets, JIDs and request rows a dispatch would
 * have left, encoded by the store's own codec).
 */

export type FleetPostgres = PostgresCluster;

export function startFleetPostgres(): Promise<FleetPostgres> {
  return startPostgres({ settings: { max_connections: '50' } });
}

const CHUNK = 5_000;

/** A fresh database `name` holding `size` published requests; the store over it (pool as many connections as the sweep has exchanges would be unfair: the default). */
export async function seedPostgresFleet(cluster: FleetPostgres, name: string, size: number): Promise<RecordStore> {
  const connectionString = await cluster.createDatabase(name);
  await migratePostgres({ connectionString });
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    for (let from = 0; from < size; from += CHUNK) {
      const records = Array.from({ length: Math.min(CHUNK, size - from) }, (_, i) => publishedRecord(from + i));
      const ids = records.map((r) => r.request_id);
      const minions = records.map((r) => r.minion_id);
      const jids = records.map((r) => r.jid);
      await client.query('BEGIN');
      await client.query('INSERT INTO oduflow.targets (minion_id) SELECT unnest($1::text[])', [minions]);
      await client.query('INSERT INTO oduflow.jids (jid, request_id) SELECT * FROM unnest($1::text[], $2::text[])', [jids, ids]);
      await client.query(
        'INSERT INTO oduflow.requests (request_id, minion_id, jid, state, blocking, record) SELECT i, m, j, s, true, r::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS t(i, m, j, s, r)',
        [ids, minions, jids, records.map((r) => r.state), records.map((r) => JSON.stringify(encodeRecord(r)))],
      );
      await client.query('COMMIT');
    }
    await client.query('ANALYZE');
  } finally {
    await client.end();
  }
  return createPostgresRecordStore({ connectionString });
}
