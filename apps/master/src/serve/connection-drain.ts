import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/*
 * Closing the listener waits for every open connection to end. Node (and
 * fastify's default, `forceCloseConnections: 'idle'`) closes the keep-alive
 * connections that sit between two requests, but not a connection that has
 * never carried a request: Node counts it as waiting for its first headers
 * until `headersTimeout` (60 s, checked every 30 s). HTTP clients open those
 * all the time — undici keeps the socket of a request its caller aborted
 * before it was written, browsers pre-connect — so one such client held a
 * SIGTERM drain for about a minute (found by the multi-instance hammer
 * test). This tracks the requests in flight per socket; once the drain
 * starts, every socket with none is closed at once, and every other one
 * right after its last response is written. A request that arrives on a
 * socket in that instant fails at the client before anything was handled,
 * which a client retries like any refused connection.
 */

export interface ConnectionDrain {
  /** From now on, no connection is kept open without a request in flight. */
  closeWhenIdle(): void;
}

export function trackConnections(server: Server): ConnectionDrain {
  const inFlight = new Map<Socket, number>();
  let draining = false;

  server.on('connection', (socket: Socket) => {
    if (draining) {
      socket.destroy();
      return;
    }
    inFlight.set(socket, 0);
    socket.once('close', () => inFlight.delete(socket));
  });
  server.on('request', (request: { socket: Socket }, response: ServerResponse) => {
    const socket = request.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = (inFlight.get(socket) ?? 1) - 1;
      inFlight.set(socket, left);
      // After the response is flushed: destroySoon ends the socket once its writes are out.
      if (draining && left === 0) socket.destroySoon();
    });
  });

  return {
    closeWhenIdle: () => {
      draining = true;
      for (const [socket, requests] of inFlight) if (requests === 0) socket.destroy();
    },
  };
}
