import pg from 'pg';
import { MasterRunnerError } from '../errors.js';
import { resolveConnection, type PostgresStoreOptions } from './connection.js';
import type { Query } from './database.js';
import { fromPgError, sqlStateOf } from './pg-errors.js';
import { BOOTSTRAP_SQL, MIGRATIONS, POSTGRES_SCHEMA_VERSION, SCHEMA } from './schema.js';

/*
 * `oduflow-master migrate`: brings a database to POSTGRES_SCHEMA_VERSION.
 * Each migration runs in its own transaction that first takes a
 * transaction-scoped advisory lock (so concurrent migrators queue, and the
 * one that waited re-reads the version and finds nothing left to do), then
 * applies exactly the next version and records it. Running it again is a
 * no-op. A database at a version this release does not know is refused and
 * left untouched. Stores refuse any database not at the current version,
 * so a half-migrated database is never used.
 */

/** pg_advisory_xact_lock key of oduflow's migrations ("oduflow" in ASCII). */
const MIGRATION_LOCK_KEY = '31354177807216503';

function needsMigration(location: string, version: number): MasterRunnerError {
  const what = version === 0 ? 'has no oduflow schema yet' : `has the oduflow schema at version ${version}`;
  return new MasterRunnerError(
    'store_format',
    `the PostgreSQL database ${location} ${what}; this release needs version ${POSTGRES_SCHEMA_VERSION}: run "oduflow-master migrate" once`,
    { detail: 'needs_migration' },
  );
}

function newerSchema(location: string, version: number): MasterRunnerError {
  return new MasterRunnerError(
    'store_format',
    `the PostgreSQL database ${location} has the oduflow schema at version ${version}, newer than this release knows (${POSTGRES_SCHEMA_VERSION}); it was left untouched`,
    { detail: 'unknown_format' },
  );
}

/** The schema version recorded in the database; 0 when there is no oduflow schema. */
export async function readSchemaVersion(q: Query): Promise<number> {
  try {
    const found = await q<{ version: number | null }>(`SELECT max(version) AS version FROM ${SCHEMA}.schema_migrations`);
    return found.rows[0]?.version ?? 0;
  } catch (error) {
    const state = sqlStateOf(error);
    // No schema, or no bookkeeping table in it: nothing was ever migrated.
    if (state === '3F000' || state === '42P01') return 0;
    throw error;
  }
}

/** Refuses a database that is not at the version this release reads and writes. */
export function checkSchemaVersion(location: string, version: number): void {
  if (version === POSTGRES_SCHEMA_VERSION) return;
  throw version < POSTGRES_SCHEMA_VERSION ? needsMigration(location, version) : newerSchema(location, version);
}

/** One transaction: the lock, the bookkeeping, then the next migration if one is due. Returns the version found. */
async function step(client: pg.Client, location: string): Promise<{ found: number; applied: boolean }> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    await client.query(BOOTSTRAP_SQL);
    const found = await readSchemaVersion((sql, params) => client.query(sql, params === undefined ? undefined : [...params]));
    if (found > POSTGRES_SCHEMA_VERSION) throw newerSchema(location, found);
    const next = MIGRATIONS.find((m) => m.version === found + 1);
    if (next === undefined || found >= POSTGRES_SCHEMA_VERSION) {
      await client.query('COMMIT');
      return { found, applied: false };
    }
    await client.query(next.sql);
    await client.query(`INSERT INTO ${SCHEMA}.schema_migrations (version, description) VALUES ($1, $2)`, [next.version, next.description]);
    await client.query('COMMIT');
    return { found, applied: true };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * Migrates the database to POSTGRES_SCHEMA_VERSION. `from` is the version it
 * had when this call first held the migration lock, `to` the one it has now.
 */
export async function migratePostgres(options: PostgresStoreOptions): Promise<{ from: number; to: number }> {
  const connection = resolveConnection(options);
  const client = new pg.Client(connection.pool);
  client.on('error', () => undefined);
  try {
    await client.connect();
    let from: number | undefined;
    for (;;) {
      const { found, applied } = await step(client, connection.location);
      from ??= found;
      if (!applied) return { from, to: found };
    }
  } catch (error) {
    throw fromPgError(error, `migrating the PostgreSQL database ${connection.location}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}
