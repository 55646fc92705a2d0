import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { SaltFailureReason } from './salt-client.js';

/*
 * One HTTP exchange over node:http, with the one fact fetch() cannot give:
 * whether a byte of the request may have left. The boundary is the moment the
 * connection is established (TCP connect for http, the TLS handshake for
 * https): request bytes are written only after it. A failure before it
 * (refused, DNS, connect timeout) is `sent: false`; anything after it is
 * `sent: true`, because the server may have read and acted on the request.
 * By default an exchange uses a fresh connection (no keep-alive agent), so a
 * reused socket can never make an earlier connection look like a new one:
 * publications always do. Idempotent reads may pass a keep-alive agent; on a
 * reused socket the request counts as sent from the start (`reusedSocket`).
 */

export interface HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export type HttpOutcome =
  | { readonly ok: true; readonly response: HttpResponse }
  | { readonly ok: false; readonly sent: boolean; readonly reason: SaltFailureReason };

export interface HttpExchange {
  readonly method: 'GET' | 'POST';
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Hard deadline for the whole exchange, connect included. */
  readonly deadlineMs: number;
  /** A keep-alive agent (idempotent reads only); default: a fresh connection. */
  readonly agent?: Agent;
  /** Ends the exchange early; reported like the deadline (the caller that aborted knows why). */
  readonly signal?: AbortSignal;
}

const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

function reasonBeforeConnect(code: string | undefined, deadlineHit: boolean): SaltFailureReason {
  if (deadlineHit) return 'connect_timeout';
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'host_not_found';
  return 'network_error';
}

function reasonAfterConnect(code: string | undefined, deadlineHit: boolean): SaltFailureReason {
  if (deadlineHit) return 'timeout';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'connection_reset';
  return 'network_error';
}

export function exchange(url: URL, spec: HttpExchange): Promise<HttpOutcome> {
  return new Promise((resolve) => {
    let connected = false;
    let deadlineHit = false;
    let settled = false;
    const onAbort = (): void => {
      deadlineHit = true;
      req.destroy(new Error('aborted'));
    };
    const settle = (outcome: HttpOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      spec.signal?.removeEventListener('abort', onAbort);
      resolve(outcome);
    };

    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, { method: spec.method, headers: spec.headers, agent: spec.agent ?? false });
    const timer = setTimeout(() => {
      deadlineHit = true;
      req.destroy(new Error('deadline exceeded'));
    }, spec.deadlineMs);
    if (spec.signal?.aborted === true) onAbort();
    else spec.signal?.addEventListener('abort', onAbort, { once: true });

    req.on('socket', (socket: Socket) => {
      const established = url.protocol === 'https:' ? 'secureConnect' : 'connect';
      // A kept-alive socket is established already (and an earlier exchange used it).
      if (req.reusedSocket || (!socket.connecting && url.protocol !== 'https:')) {
        connected = true;
        return;
      }
      socket.once(established, () => {
        connected = true;
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      const reason = connected ? reasonAfterConnect(error.code, deadlineHit) : reasonBeforeConnect(error.code, deadlineHit);
      settle({ ok: false, sent: connected, reason });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_RESPONSE_BYTES) {
          settle({ ok: false, sent: true, reason: 'response_too_large' });
          req.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => {
        settle({ ok: true, response: { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') } });
      });
      res.on('error', () => settle({ ok: false, sent: true, reason: deadlineHit ? 'timeout' : 'connection_reset' }));
      res.on('aborted', () => settle({ ok: false, sent: true, reason: deadlineHit ? 'timeout' : 'connection_reset' }));
    });
    req.end(spec.body);
  });
}
