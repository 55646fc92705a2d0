import { createPostgresRecordStore, migratePostgres } from '@oduflow/master-runner/postgres';
import { afterAll, beforeAll } from 'vitest';
import { startPostgres, type PostgresCluster } from '../src/postgres.js';
import { runRecordStoreConformance } from '../src/store-conformance.js';

/*
 * The PostgreSQL store against the shared store contract, on a real
 * PostgreSQL 15 with its durability defaults: a fresh database per case,
 * migrated by migratePostgres, so no case sees another's rows. A create is
 * one transaction there, so there is no interrupted create to leave behind
 * (interruptCreate is omitted and the suite told so, which leaves out the
 * interrupted-create cases; the SIGKILL test in postgres-store.test.ts shows
 * the transaction leaves nothing).
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

runRecordStoreConformance('PostgreSQL store', async () => {
  databases += 1;
  const connectionString = await cluster.createDatabase(`conformance_${databases}`);
  await migratePostgres({ connectionString });
  const store = await createPostgresRecordStore({ connectionString, lockTimeoutMs: 10_000 });
  return {
    store,
    dispose: async () => {
      await store.close();
    },
  };
}, { createIsOneTransaction: true });
