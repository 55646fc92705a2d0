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

/** `_stamp` is UTC without a zone and with microseconds: keep milliseconds, read as UTC. */
function stampMs(stamp: unknown): number | undefined {
  if (typeof stamp !== 'string') return undefined;
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,3})?\d*$/.exec(stamp);
  if (match === null) return undefined;
  return Date.parse(`${match[1] ?? ''}${match[2] ?? ''}Z`);
}

function readReturn(data: Record<string, unknown>, atMs: number): JobReturn {
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
  const controller = new AbortController();
  const returns = new Map<string, JobReturn>();
  const waiters = new Map<string, (r: JobReturn) => void>();
  const response = await fetch(`${saltApiUrl}/events`, { headers: { 'X-Auth-Token': token, accept: 'text/event-stream' }, signal: controller.signal });
  if (!response.ok || response.body === null) throw new Error('salt-api /events did not answer 200');
  const body = response.body as unknown as AsyncIterable<Uint8Array>;
  const decoder = new TextDecoder();
  void (async () => {
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end = buffer.indexOf('\n\n');
        while (end !== -1) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf('\n\n');
          const dataLine = frame.split('\n').find((l) => l.startsWith('data: '));
          if (dataLine === undefined) continue;
          const event = JSON.parse(dataLine.slice('data: '.length)) as { tag?: unknown; data?: Record<string, unknown> };
          if (typeof event.tag !== 'string' || !/^salt\/job\/\d{20}\/ret\//.test(event.tag) || event.data === undefined) continue;
          const jid = event.data['jid'];
          const at = stampMs(event.data['_stamp']);
          if (typeof jid !== 'string' || at === undefined) continue;
          const got = readReturn(event.data, at);
          returns.set(jid, got);
          waiters.get(jid)?.(got);
        }
      }
    } catch {
      // aborted by stop(), or salt-api went away: waits time out
    }
  })();
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
    stop: () => controller.abort(),
  };
}
