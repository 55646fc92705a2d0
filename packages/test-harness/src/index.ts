export * from './fixtures.js';
export * from './store-conformance.js';
export * from './topology.js';
export { startPostgres, POSTGRES_BIN_DIR, POSTGRES_OS_USER, type PostgresCluster, type PostgresOptions } from './postgres.js';
