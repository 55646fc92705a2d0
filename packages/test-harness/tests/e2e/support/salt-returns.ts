import { followJobReturns } from './salt-job-returns.js';

/*
 * The test's own ear on the salt-master's event bus, beside the service's:
 * when each `oduflow_job.run` return reached the master, by the master's own
 * `_stamp`, so the time from a minion's return to the service's terminal
 * record can be measured from outside the service.
 */

export interface SaltReturns {
  /** The master's `_stamp` (epoch ms) of the `run` return of this JID, once it arrived. */
  stampOf(jid: string): number | undefined;
  stop(): void;
}

export async function followSaltReturns(saltApiUrl: string, token: string): Promise<SaltReturns> {
  const stamps = new Map<string, number>();
  const stop = await followJobReturns(saltApiUrl, token, (jid, atMs, data) => {
    if (data['fun'] === 'oduflow_job.run') stamps.set(jid, atMs);
  });
  return { stampOf: (jid) => stamps.get(jid), stop };
}
