import { createParser } from 'eventsource-parser';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { parseJsonText } from './json-text.js';
import type { EventStreamEnd, SaltFailureReason } from './salt-client.js';

/*
 * One connection to salt-api's `GET /events` (rest_cherrypy, Events.GET,
 * salt/netapi/rest_cherrypy/app.py:2235-2437): server-sent events, one per
 * master event, as `tag: <tag>` (not an SSE field; parsers ignore it) and
 * `data: {"tag": ..., "data": {...}}`. The token goes in X-Auth-Token:
 * 3006.27 refuses every query parameter on /events (app.py:2385-2396).
 * salt-api ends the stream when the token stops being valid (app.py:2425-2428).
 *
 * No deadline bounds the stream itself (a quiet master sends nothing for a
 * long time); TCP keep-alive notices a peer that vanished, and the poller
 * covers whatever a dead stream missed.
 */

export interface EventStreamSpec {
  readonly token: string;
  readonly connectTimeoutMs: number;
  readonly signal: AbortSignal;
  readonly onEvent: (event: unknown) => void;
  readonly onOpen?: () => void;
}

const KEEPALIVE_PROBE_MS = 15_000;
/** An event bigger than this is not one this runner can use (a receipt is ~300 B); the stream is dropped. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

function statusFailure(status: number): SaltFailureReason {
  if (status === 401 || status === 403) return 'unauthorized';
  return status >= 500 ? 'server_error' : 'http_error';
}

export function followEventStream(url: URL, spec: EventStreamSpec): Promise<EventStreamEnd> {
  return new Promise((resolve) => {
    let settled = false;
    let opened = false;
    const settle = (end: EventStreamEnd): void => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      spec.signal.removeEventListener('abort', onAbort);
      req.destroy();
      resolve(end);
    };
    const onAbort = (): void => settle({ kind: 'aborted' });

    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, {
      method: 'GET',
      headers: { accept: 'text/event-stream', 'cache-control': 'no-cache', 'x-auth-token': spec.token },
      agent: false,
    });
    const connectTimer = setTimeout(() => settle({ kind: 'failed', reason: 'connect_timeout' }), spec.connectTimeoutMs);
    if (spec.signal.aborted) onAbort();
    else spec.signal.addEventListener('abort', onAbort, { once: true });

    req.on('socket', (socket) => socket.setKeepAlive(true, KEEPALIVE_PROBE_MS));
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') return settle({ kind: 'failed', reason: 'connection_refused' });
      settle({ kind: 'failed', reason: opened ? 'connection_reset' : 'network_error' });
    });
    req.on('response', (res: IncomingMessage) => {
      clearTimeout(connectTimer);
      const status = res.statusCode ?? 0;
      if (status !== 200 || !(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        res.resume();
        return settle({ kind: 'failed', reason: status === 200 ? 'malformed_response' : statusFailure(status) });
      }
      opened = true;
      spec.onOpen?.();
      let pending = 0;
      const parser = createParser({
        onEvent: (message) => {
          pending = 0;
          const event = parseJsonText(message.data);
          if (event !== undefined) spec.onEvent(event);
        },
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk.length;
        if (pending > MAX_EVENT_BYTES) return settle({ kind: 'failed', reason: 'response_too_large' });
        parser.feed(chunk);
      });
      res.on('end', () => settle({ kind: 'ended' }));
      res.on('aborted', () => settle({ kind: 'failed', reason: 'connection_reset' }));
      res.on('error', () => settle({ kind: 'failed', reason: 'connection_reset' }));
    });
    req.end();
  });
}
