/*
 * A TCP proxy in front of salt-api that can lose an acknowledgement for real.
 *
 * It forwards every connection byte for byte. It counts the requests whose
 * body names `local_async` (publications) as they pass: each one is forwarded
 * in full, so every counted request reached salt-api. When armed, the next
 * publication is forwarded; when salt-api's answer starts to arrive, the
 * proxy runs the hook (the test kills salt-api with SIGKILL), then resets the
 * client's connection without forwarding a byte of the answer. The runner
 * has sent its request and gets no acknowledgement: a lost ack.
 *
 * The master runner opens a fresh connection per exchange (no keep-alive),
 * so one connection carries one request.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface LostAckProxy {
  /** `http://127.0.0.1:<port>` to give the salt-api client. */
  readonly url: string;
  /** Publications (requests naming local_async) forwarded to salt-api so far. */
  publications(): number;
  /** Answers withheld from the client so far. */
  lostAcks(): number;
  /** The next publication's answer is withheld: `hook` runs first, then the client connection is reset. */
  armLostAck(hook: () => Promise<void>): void;
  /** Settles when the armed hook has run and the client connection was reset. */
  lostAckDone(): Promise<void>;
  close(): Promise<void>;
}

export async function startLostAckProxy(upstreamPort: number): Promise<LostAckProxy> {
  let publications = 0;
  let lostAcks = 0;
  let armed: (() => Promise<void>) | undefined;
  let done: Promise<void> = Promise.resolve();
  let markDone: () => void = () => undefined;
  const sockets = new Set<Socket>();

  const server: Server = createServer((client) => {
    sockets.add(client);
    const upstream = createConnection({ host: '127.0.0.1', port: upstreamPort });
    sockets.add(upstream);
    let request = '';
    let counted = false;
    let withhold: (() => Promise<void>) | undefined;
    let withholding = false;

    const closeBoth = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    client.on('error', closeBoth);
    upstream.on('error', () => {
      // salt-api down: the client sees its connection reset (after a connect it made to us).
      if (!withholding) client.resetAndDestroy();
      upstream.destroy();
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => {
      if (!withholding) client.end();
    });

    client.on('data', (chunk: Buffer) => {
      request += chunk.toString('latin1');
      if (!counted && request.includes('local_async')) {
        counted = true;
        publications += 1;
        if (armed !== undefined) {
          withhold = armed;
          armed = undefined;
        }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (withhold === undefined) {
        client.write(chunk);
        return;
      }
      if (withholding) return;
      withholding = true;
      const hook = withhold;
      upstream.pause();
      void hook()
        .catch(() => undefined)
        .finally(() => {
          lostAcks += 1;
          client.resetAndDestroy();
          upstream.destroy();
          markDone();
        });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('lost-ack proxy: no port');

  return {
    url: `http://127.0.0.1:${address.port}`,
    publications: () => publications,
    lostAcks: () => lostAcks,
    armLostAck(hook) {
      armed = hook;
      done = new Promise<void>((resolve) => {
        markDone = resolve;
      });
    },
    lostAckDone: () => done,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
