/*
 * The test's own ear on the salt-master's event bus (salt-api `GET /events`,
 * beside the service's): when each `oduflow_job.run` return reached the
 * master, by the master's own `_stamp` (UTC, microseconds), so the time from
 * a minion's return to the service's terminal record can be measured from
 * outside the service.
 */

export interface SaltReturns {
  /** The master's `_stamp` (epoch ms) of the `run` return of this JID, once it arrived. */
  stampOf(jid: string): number | undefined;
  stop(): void;
}

/** `_stamp` is UTC without a zone and with microseconds: keep milliseconds, read as UTC. */
function stampMs(stamp: unknown): number | undefined {
  if (typeof stamp !== 'string') return undefined;
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,3})?\d*$/.exec(stamp);
  if (match === null) return undefined;
  return Date.parse(`${match[1] ?? ''}${match[2] ?? ''}Z`);
}

export async function followSaltReturns(saltApiUrl: string, token: string): Promise<SaltReturns> {
  const controller = new AbortController();
  const stamps = new Map<string, number>();
  const response = await fetch(`${saltApiUrl}/events`, { headers: { 'X-Auth-Token': token, accept: 'text/event-stream' }, signal: controller.signal });
  if (!response.ok || response.body === null) throw new Error(`salt-api /events answered ${response.status}`);
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
          if (typeof event.tag !== 'string' || !/^salt\/job\/\d{20}\/ret\//.test(event.tag) || event.data?.['fun'] !== 'oduflow_job.run') continue;
          const at = stampMs(event.data['_stamp']);
          if (typeof event.data['jid'] === 'string' && at !== undefined) stamps.set(event.data['jid'], at);
        }
      }
    } catch {
      // aborted by stop(), or salt-api went away: the measurements taken so far stay
    }
  })();
  return { stampOf: (jid) => stamps.get(jid), stop: () => controller.abort() };
}
