/*
 * An ear on the salt-master's event bus (salt-api `GET /events`, a
 * server-sent event stream): calls `onReturn` for every job return
 * (`salt/job/<jid>/ret/<minion>`) with its JID, the master's own `_stamp`
 * (UTC, microseconds, read as epoch ms) and the event's data. Shared by the
 * live e2e suite and the live benchmark; what each keeps of `data` is its
 * own business (never a state's output).
 */

/** `_stamp` is UTC without a zone and with microseconds: keep milliseconds, read as UTC. */
function stampMs(stamp: unknown): number | undefined {
  if (typeof stamp !== 'string') return undefined;
  const match = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,3})?\d*$/.exec(stamp);
  if (match === null) return undefined;
  return Date.parse(`${match[1] ?? ''}${match[2] ?? ''}Z`);
}

export type OnJobReturn = (jid: string, atMs: number, data: Readonly<Record<string, unknown>>) => void;

/** Follows the stream until the returned `stop` is called (or salt-api goes away). */
export async function followJobReturns(saltApiUrl: string, token: string, onReturn: OnJobReturn): Promise<() => void> {
  const controller = new AbortController();
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
          if (typeof event.tag !== 'string' || !/^salt\/job\/\d{20}\/ret\//.test(event.tag) || event.data === undefined) continue;
          const jid = event.data['jid'];
          const at = stampMs(event.data['_stamp']);
          if (typeof jid === 'string' && at !== undefined) onReturn(jid, at, event.data);
        }
      }
    } catch {
      // aborted by stop(), or salt-api went away: what was heard so far stays
    }
  })();
  return () => controller.abort();
}
