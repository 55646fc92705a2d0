import type { FastifyReply, FastifyRequest } from 'fastify';

/*
 * One server-sent event stream (text/event-stream) on a hijacked reply: the
 * framing, a heartbeat comment so proxies and the browser keep the
 * connection, and backpressure. A stream whose client does not read (its
 * socket buffer passes the limit) is closed rather than buffered without
 * bound; the dashboard reconnects and reloads what it shows.
 */

export interface EventStream {
  /** Sends one event; false once the stream is closed. */
  send(event: string, data: unknown): boolean;
  /** Ends the stream and drops its connection (a client that is not reading must not hold a shutdown). */
  close(): void;
  readonly closed: Promise<void>;
}

export interface EventStreamOptions {
  readonly heartbeatMs?: number;
  /** Bytes queued on the socket beyond which the stream is dropped (default 1 MiB). */
  readonly maxBufferedBytes?: number;
}

export function openEventStream(request: FastifyRequest, reply: FastifyReply, options: EventStreamOptions = {}): EventStream {
  const raw = reply.raw;
  // Kept: the response detaches from its socket when it ends, and the socket must go with the stream.
  const socket = request.raw.socket;
  reply.hijack();
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-accel-buffering': 'no',
    'x-content-type-options': 'nosniff',
    // An event stream's connection is never reused: when the stream ends, so does the connection.
    connection: 'close',
  });
  // Tells the client how long to wait before it reconnects (EventSource semantics).
  raw.write('retry: 2000\n\n');
  const maxBuffered = options.maxBufferedBytes ?? 1024 * 1024;
  let open = true;
  let resolveClosed: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => (resolveClosed = resolve));
  const heartbeat = setInterval(() => {
    if (open) raw.write(': keep-alive\n\n');
  }, options.heartbeatMs ?? 15_000);
  heartbeat.unref();
  const close = (): void => {
    if (open) {
      open = false;
      clearInterval(heartbeat);
      raw.end();
      resolveClosed();
    }
    // An idle keep-alive socket left behind would hold the service's shutdown until its keep-alive timeout.
    if (!socket.destroyed) socket.destroy();
  };
  request.raw.on('close', () => close());
  raw.on('close', () => close());
  raw.on('error', () => close());
  let id = 0;
  return {
    send(event, data) {
      if (!open) return false;
      if (raw.writableLength > maxBuffered) {
        close();
        return false;
      }
      id += 1;
      // JSON.stringify never emits a raw newline, so one data line carries the event.
      raw.write(`id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      return true;
    },
    close,
    closed,
  };
}
