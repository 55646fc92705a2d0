import { createFileRecordStore } from '../../src/file-record-store.js';
import type { CrashPoint } from '../../src/crash-points.js';
import { relayOnce } from '../../src/outbox-relay.js';
import { createSaltApiClient } from '../../src/salt-api-client.js';

/*
 * A separate Node process running one outbox relay pass on a file store
 * against a salt-api stand-in, SIGKILLing itself at a master crash point
 * (P2: intent recorded, Salt not called; P3: Salt called, outcome not
 * recorded). Without `at` it runs to its end and prints DONE <json>; the
 * parent may also SIGKILL it while the stand-in holds its publication.
 * Bundled by store-process.ts; argv[2] is a JSON RelayJob.
 */

interface Job {
  readonly root: string;
  readonly url: string;
  readonly username: string;
  readonly passwordFile: string;
  readonly at?: CrashPoint;
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;

const store = await createFileRecordStore({ root: job.root, lockWaitMs: 10_000 });
const salt = createSaltApiClient({ url: job.url, username: job.username, passwordFile: job.passwordFile, eauth: 'sharedsecret', timeoutMs: 15_000 });
const crashAt = (point: CrashPoint): void => {
  if (point === job.at) process.kill(process.pid, 'SIGKILL');
};
try {
  const results = await relayOnce({ store, salt, crashAt });
  process.stdout.write(`DONE ${JSON.stringify(results.map((r) => ({ requestId: r.requestId, outcome: r.outcome })))}\n`);
} finally {
  await store.close();
}
