// A separate Node process that works on a PostgreSQL store through the
// published subpath (the built dist) and stops inside a unit: argv[2] is a
// JSON job {connectionString, record, key?, outbox?}. It opens the store,
// enters withTarget(record.minion_id), creates the record (with the key and
// outbox entry when given), prints HOLDING and blocks this thread inside the
// still-open transaction until the parent SIGKILLs it.
import { createPostgresRecordStore } from '@oduflow/master-runner/postgres';

const job = JSON.parse(process.argv[2] ?? '{}');
const store = await createPostgresRecordStore({ connectionString: job.connectionString, poolSize: 1 });
await store.withTarget(job.record.minion_id, async (unit) => {
  const outcome = await unit.create(job.record, { ...(job.key ? { key: job.key } : {}), ...(job.outbox ? { outbox: job.outbox } : {}) });
  if (!outcome.created) throw new Error(`create refused: ${outcome.reason}`);
  process.stdout.write('HOLDING\n', () => {
    // The transaction stays open (record, JID, outbox row and key written, not committed) until SIGKILL.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  });
  await new Promise(() => undefined);
});
