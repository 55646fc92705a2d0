import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GOOD_CAPABILITIES, startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../../src/exit-codes.js';
import { assertBuilt, cliEnv } from '../support/cli.js';
import { spawnServe, writeTokensFile, type ServeProcess } from './support/serve-process.js';
import { ACME_A, TOKENS, testTokensFile, waitFor } from './support/service-world.js';

/*
 * Regression (found by the multi-instance hammer): a SIGTERM drain waited
 * about a minute for any client connection that had never carried a
 * request — Node keeps such a socket until its headersTimeout (60 s), and
 * HTTP clients leave them behind routinely (undici after an aborted fetch,
 * browsers' pre-connects). The drain must close those at once and still
 * let a request in flight finish with its answer.
 */

let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;
const running: ServeProcess[] = [];
const sockets: Socket[] = [];

beforeAll(() => assertBuilt());
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-drain-'));
  chmodSync(dir, 0o700);
  env = { ...cliEnv(dir, standIn), ODUFLOW_TOKENS_FILE: writeTokensFile(dir, testTokensFile()), ODUFLOW_CALL_TIMEOUT_MS: '10000' };
});
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const p of running.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exited;
  }
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A TCP connection to the service that sends nothing; resolves once connected, `closed` once the server closed it. */
async function silentConnection(address: string): Promise<{ closed: Promise<void> }> {
  const url = new URL(address);
  const socket = connect(Number(url.port), url.hostname);
  sockets.push(socket);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => undefined);
  return { closed };
}

describe('serve drains its connections on SIGTERM', () => {
  it('closes connections that never carried a request at once, and exits 0 well before Node would time them out', async () => {
    const p = spawnServe(env);
    running.push(p);
    const address = await p.address;
    const silent = await Promise.all([silentConnection(address), silentConnection(address)]);
    // And a keep-alive connection between two requests (Node closes those itself).
    expect((await fetch(`${address}/healthz`)).status).toBe(200);

    const stoppedAt = Date.now();
    p.child.kill('SIGTERM');
    const exit = await p.exited;
    const drainMs = Date.now() - stoppedAt;
    expect(exit.code).toBe(EXIT.ok);
    await Promise.all(silent.map((s) => s.closed));
    // Without the fix this took 60–90 s (headersTimeout, checked every 30 s); a loaded machine needs a few seconds.
    expect(drainMs).toBeLessThan(20_000);
  }, 40_000);

  it('still answers a request in flight when the drain starts, then exits 0', async () => {
    const p = spawnServe(env);
    running.push(p);
    const address = await p.address;
    await silentConnection(address);
    let answerCapability: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (answerCapability = resolve));
    standIn.capabilities = () => ({ after: held, reply: { retcode: 0, ret: GOOD_CAPABILITIES } });

    const admission = fetch(`${address}/v1/requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': 'drain-in-flight', 'content-type': 'application/json' },
      body: JSON.stringify({ minion_id: ACME_A, profile: 'configure' }),
    });
    await waitFor(() => standIn.calls.some((c) => c.fun === 'oduflow_job.capabilities'), 10_000, 'the admission asked the minion');
    p.child.kill('SIGTERM');
    await p.logged('stopping: draining requests and background loops');
    answerCapability();

    const response = await admission;
    expect(response.status).toBe(202);
    expect(((await response.json()) as ProtocolRequestRecord).state).toBe('prepared');
    expect((await p.exited).code).toBe(EXIT.ok);
  }, 40_000);
});
