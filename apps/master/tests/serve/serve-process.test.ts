import { createFileRecordStore } from '@oduflow/master-runner';
import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../../src/exit-codes.js';
import { assertBuilt, cliEnv, runCli } from '../support/cli.js';
import { spawnServe, writeTokensFile, type ServeProcess } from './support/serve-process.js';
import { tokenDigest } from '../../src/serve/tokens.js';
import { ACME_A, TOKENS, testTokensFile, waitFor } from './support/service-world.js';

/*
 * The built executable: `oduflow-master serve` in a real process, stopped
 * with real signals, over a file store and the salt-api stand-in in this
 * test process.
 */

let standIn: SaltApiStandIn;
let dir: string;
let storeRoot: string;
let env: Record<string, string>;
const running: ServeProcess[] = [];

beforeAll(() => assertBuilt());
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-proc-'));
  chmodSync(dir, 0o700);
  storeRoot = join(dir, 'store');
  env = {
    ...cliEnv(dir, standIn),
    ODUFLOW_TOKENS_FILE: writeTokensFile(dir, testTokensFile()),
    ODUFLOW_POLL_WALK_INTERVAL_MS: '200',
    // Generous: the machine may be loaded, and no test here waits for a deadline to pass.
    ODUFLOW_CALL_TIMEOUT_MS: '10000',
  };
});
afterEach(async () => {
  for (const p of running.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exited;
  }
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

function serve(args: readonly string[] = [], extraEnv: Record<string, string> = {}): ServeProcess {
  const p = spawnServe({ ...env, ...extraEnv }, args);
  running.push(p);
  return p;
}

async function admit(address: string, key: string, minionId = ACME_A): Promise<Response> {
  return fetch(`${address}/v1/requests`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ minion_id: minionId, profile: 'configure' }),
  });
}

async function read(address: string, requestId: string): Promise<ProtocolRequestRecord> {
  const response = await fetch(`${address}/v1/requests/${requestId}`, { headers: { authorization: `Bearer ${TOKENS.acmeRead}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as ProtocolRequestRecord;
}

/** Every file under the store whose name says a write was left half-done. */
function leftovers(root: string): string[] {
  const found: string[] = [];
  const walk = (path: string): void => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(path, entry.name));
      else if (entry.name.startsWith('.tmp-')) found.push(join(path, entry.name));
    }
  };
  walk(root);
  return found;
}

async function storedRecord(requestId: string): Promise<ProtocolRequestRecord | undefined> {
  const store = await createFileRecordStore({ root: storeRoot, create: false });
  try {
    return (await store.get(requestId)) as ProtocolRequestRecord | undefined;
  } finally {
    await store.close();
  }
}

describe('oduflow-master serve', () => {
  it('publishes a request admitted over HTTP once, polls it to the minion’s receipt, and exits 0 on SIGTERM', async () => {
    // No event stream: the poller has to find the result.
    const p = serve(['--event-stream', 'off']);
    const address = await p.address;
    expect(address).toMatch(/^http:\/\/127\.0\.0\.1:[0-9]+$/);
    expect((await fetch(`${address}/readyz`)).status).toBe(200);

    const response = await admit(address, 'process-key-1');
    expect(response.status).toBe(202);
    const admitted = (await response.json()) as ProtocolRequestRecord;
    await waitFor(async () => (await read(address, admitted.request_id)).state === 'succeeded', 15_000, 'polled to succeeded');
    expect(await read(address, admitted.request_id)).toMatchObject({ passed: 60, total: 60, jid: admitted.jid });
    expect(standIn.publicationsOf(admitted.request_id)).toBe(1);
    expect(standIn.publicationsUnder(admitted.jid)).toBe(1);
    expect(standIn.calls.some((c) => c.fun === 'oduflow_job.status')).toBe(true);

    p.child.kill('SIGTERM');
    expect(await p.exited).toEqual({ code: EXIT.ok, signal: null });
    expect(p.lines().map((l) => l['msg'])).toEqual(expect.arrayContaining(['serving', 'stopping: draining requests and background loops', 'stopped']));
    expect(p.stderr()).not.toContain(TOKENS.acmeAll);
  });

  it('drains on SIGTERM: a publication in flight is finished and recorded, nothing is left half-written, and a restart publishes nothing again', async () => {
    standIn.publishMode = 'hold';
    standIn.returnEvents = false;
    const p = serve();
    const address = await p.address;
    const admitted = (await (await admit(address, 'drain-key')).json()) as ProtocolRequestRecord;
    await waitFor(() => standIn.publicationRequests === 1, 10_000, 'the relay sent the publication');

    p.child.kill('SIGTERM');
    await p.logged('stopping: draining requests and background loops');
    // The listener is closed at once; the publication is still in flight.
    await expect(fetch(`${address}/healthz`)).rejects.toThrow();
    standIn.releaseHeld();
    expect(await p.exited).toEqual({ code: EXIT.ok, signal: null });

    expect(await storedRecord(admitted.request_id)).toMatchObject({ state: 'published', publish_attempts: 1 });
    expect(readdirSync(join(storeRoot, 'outbox'))).toEqual([]);
    expect(leftovers(storeRoot)).toEqual([]);
    expect(standIn.publicationsOf(admitted.request_id)).toBe(1);

    standIn.publishMode = 'ack';
    const again = serve();
    const secondAddress = await again.address;
    await waitFor(async () => (await read(secondAddress, admitted.request_id)).state === 'succeeded', 15_000, 'polled after the restart');
    expect(standIn.publicationsOf(admitted.request_id)).toBe(1);
    again.child.kill('SIGINT');
    expect((await again.exited).code).toBe(EXIT.ok);
  });

  it('refuses a second serve on the same file store with exit 4, and the first keeps serving', async () => {
    const first = serve();
    const address = await first.address;
    const second = serve();
    expect((await second.exited).code).toBe(EXIT.busy);
    expect(second.stderr()).toContain('another oduflow-master serve is running on the store');
    expect((await fetch(`${address}/healthz`)).status).toBe(200);
    // The CLI still works beside it (it takes per-target locks, not serve.lock).
    expect((await runCli(['list', '--json'], env)).code).toBe(EXIT.ok);
    first.child.kill('SIGTERM');
    expect((await first.exited).code).toBe(EXIT.ok);
    // The lock went with the process: a new serve starts.
    const third = serve();
    await third.address;
    third.child.kill('SIGTERM');
    const thirdExit = await third.exited;
    expect(thirdExit, third.stderr()).toEqual({ code: EXIT.ok, signal: null });
  });

  it('refuses to start while active legacy records exist (exit 3, listing them), and serves them blocking with --accept-legacy', async () => {
    mkdirSync(join(storeRoot, 'requests'), { recursive: true, mode: 0o700 });
    chmodSync(storeRoot, 0o700);
    writeFileSync(join(storeRoot, 'requests', 'old-1.json'), JSON.stringify({ host: 'web-01', state: 'sent', out: 'SECRET-OUTPUT' }), { mode: 0o600 });
    expect((await runCli(['migrate-store'], env)).code).toBe(EXIT.ok);

    const refused = serve();
    expect((await refused.exited).code).toBe(EXIT.unresolved);
    expect(refused.stderr()).toContain('old-1: names no target, blocks every target');
    expect(refused.stderr()).toContain('--accept-legacy');
    expect(refused.stderr()).not.toContain('SECRET-OUTPUT');

    const accepted = serve(['--accept-legacy']);
    const address = await accepted.address;
    const blocked = await admit(address, 'legacy-key');
    expect(blocked.status).toBe(409);
    const problem = (await blocked.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({ code: 'target_blocked' });
    expect(problem).not.toHaveProperty('blocking_request_id');
    const target = await fetch(`${address}/v1/targets/${ACME_A}`, { headers: { authorization: `Bearer ${TOKENS.acmeRead}` } });
    expect(await target.json()).toEqual({ minion_id: ACME_A, blocked: true, blockers: [{ request_id: null, state: 'legacy' }] });
    expect(standIn.publications).toEqual([]);
    accepted.child.kill('SIGTERM');
    expect((await accepted.exited).code).toBe(EXIT.ok);
  });

  it('exits 2 naming the address when its port is taken', async () => {
    const first = serve();
    const port = new URL(await first.address).port;
    const other = spawnServe({ ...env, ODUFLOW_STORE: join(dir, 'other-store') }, ['--port', port]);
    running.push(other);
    expect((await other.exited).code).toBe(EXIT.refused);
    expect(other.stderr()).toContain(`cannot listen on 127.0.0.1:${port} (EADDRINUSE)`);
    first.child.kill('SIGTERM');
    expect((await first.exited).code).toBe(EXIT.ok);
  });

  it('re-reads the tokens file on SIGHUP, and keeps the previous one when the new one does not load', async () => {
    const p = serve();
    const address = await p.address;
    const fresh = 'odf_added-by-reload-0000000000000000000000000000';
    const asFresh = () => fetch(`${address}/v1/requests`, { headers: { authorization: `Bearer ${fresh}` } });
    expect((await asFresh()).status).toBe(401);
    const file = testTokensFile() as { tenants: unknown; tokens: unknown[] };
    writeTokensFile(dir, { ...file, tokens: [...file.tokens, { id: 'added', sha256: tokenDigest(fresh), tenant: 'acme', actor: 'added', scopes: ['read'] }] });
    p.child.kill('SIGHUP');
    await p.logged('tokens file reloaded');
    expect((await asFresh()).status).toBe(200);

    writeTokensFile(dir, { tenants: {}, tokens: 'not a list' });
    p.child.kill('SIGHUP');
    await p.logged('tokens file not reloaded; the previous one stays');
    expect((await asFresh()).status).toBe(200);
    p.child.kill('SIGTERM');
    expect((await p.exited).code).toBe(EXIT.ok);
  });

  it('refuses to start without a tokens file, or with one others can read, before it opens the store', async () => {
    const { ODUFLOW_TOKENS_FILE: tokensFile, ...withoutTokens } = env;
    const missing = spawnServe(withoutTokens);
    running.push(missing);
    expect((await missing.exited).code).toBe(EXIT.refused);
    expect(missing.stderr()).toContain('ODUFLOW_TOKENS_FILE');
    chmodSync(tokensFile as string, 0o644);
    const readable = serve();
    expect((await readable.exited).code).toBe(EXIT.refused);
    expect(readable.stderr()).toContain('credentials_insecure');
    expect(existsSync(storeRoot)).toBe(false);
  });
});
