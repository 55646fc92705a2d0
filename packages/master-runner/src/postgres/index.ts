// @oduflow/master-runner/postgres: the PostgreSQL RecordStore, one named export at a time.
// A subpath of its own, so importing the package root never loads `pg`.
export { DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_POOL_SIZE, type PostgresStoreOptions } from './connection.js';
export { createPostgresRecordStore } from './postgres-record-store.js';
export { migratePostgres } from './migrate.js';
export { POSTGRES_SCHEMA_VERSION } from './schema.js';
