import { authHeaders } from './api.js';

/*
 * Follows the service's server-sent events (GET /v1/events) with fetch, so
 * the bearer token travels in the Authorization header like every other
 * call (EventSource cannot send one, and a token in the URL would land in
 * logs). Reconnects with a growing delay; every (re)connection starts with
 * `ready`, on which the page reloads what it shows, since events are not
 * replayed.
 */

export type LiveStatus = 'connecting' | 'live' | 'reconnecting';

export interface LiveHandlers {
  readonly onEvent: (event: string, data: unknown) => void;
  readonly onStatus: (status: LiveStatus) => void;
}

function parseBlock(block: string): { event: string; data: string } | undefined {
  let event = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':') || line === '') continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  return data.length === 0 ? undefined : { event, data: data.join('\n') };
}

/** Follows `path` until the returned function is called. */
export function follow(path: string, handlers: LiveHandlers): () => void {
  const controller = new AbortController();
  const stopped = (): boolean => controller.signal.aborted;
  let delayMs = 500;

  const once = async (): Promise<void> => {
    handlers.onStatus('connecting');
    const response = await fetch(path, { headers: { accept: 'text/event-stream', ...authHeaders() }, credentials: 'omit', cache: 'no-store', signal: controller.signal });
    if (!response.ok || response.body === null) throw new Error(`events: ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n?/g, '\n');
      let end = buffer.indexOf('\n\n');
      while (end !== -1) {
        const parsed = parseBlock(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf('\n\n');
        if (parsed === undefined) continue;
        if (parsed.event === 'ready') {
          delayMs = 500;
          handlers.onStatus('live');
        }
        handlers.onEvent(parsed.event, JSON.parse(parsed.data));
      }
    }
  };

  const loop = async (): Promise<void> => {
    while (!stopped()) {
      try {
        await once();
      } catch {
        // Reconnect below, unless we were stopped.
      }
      if (stopped()) return;
      handlers.onStatus('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      delayMs = Math.min(delayMs * 2, 10_000);
    }
  };
  void loop();
  return () => controller.abort();
}
