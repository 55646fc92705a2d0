import { followJobReturns } from '../../tests/e2e/support/salt-job-returns.js';

/*
 * The bench's ear on the salt-master's event bus (salt-api `GET /events`):
 * for each job return, the master's own `_stamp` and whether it succeeded.
 * Only the tag, jid, `_stamp`, `success`, `retcode` and, for
 * `oduflow_job.run`, the receipt's status are kept: never a state's output.
 */

interface JobReturn {
  /** The master's `_stamp` of the return (epoch ms). */
  readonly atMs: number;
  readonly success: boolean;
  readonly retcode: number | undefined;
  /** The receipt status, for `oduflow_job.run` returns. */
  readonly status: string | undefined;
}

export interface SaltReturns {
  /** Resolves with the return of `jid` once it reached the master. */
  waitFor(jid: string, timeoutMs: number): Promise<JobReturn>;
  stop(): void;
}

function readReturn(data: Readonly<Record<string, unknown>>, atMs: number): JobReturn {
  const ret = data['return'];
  const status = data['fun'] === 'oduflow_job.run' && typeof ret === 'object' && ret !== null ? (ret as Record<string, unknown>)['status'] : undefined;
  return {
    atMs,
    success: data['success'] === true,
    retcode: typeof data['retcode'] === 'number' ? data['retcode'] : undefined,
    status: typeof status === 'string' ? status : undefined,
  };
}

export async function followSaltReturns(saltApiUrl: string, token: string): Promise<SaltReturns> {
  const returns = new Map<string, JobReturn>();
  const waiters = new Map<string, (r: JobReturn) => void>();
  const stop = await followJobReturns(saltApiUrl, token, (jid, atMs, data) => {
    const got = readReturn(data, atMs);
    returns.set(jid, got);
    waiters.get(jid)?.(got);
  });
  return {
    waitFor: (jid, timeoutMs) =>
      new Promise((resolve, reject) => {
        const known = returns.get(jid);
        if (known !== undefined) return resolve(known);
        const timer = setTimeout(() => {
          waiters.delete(jid);
          reject(new Error('bench: a job return did not arrive in time'));
        }, timeoutMs);
        waiters.set(jid, (r) => {
          clearTimeout(timer);
          waiters.delete(jid);
          resolve(r);
        });
      }),
    stop,
  };
}
