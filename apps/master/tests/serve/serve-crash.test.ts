import { createFileRecordStore } from '@oduflow/master-runner';
import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../../src/exit-codes.js';
import { assertBuilt, cliEnv } from '../support/cli.js';
import { buildCrashCli, removeCrashCli } from '../support/crash-entry.js';
import { spawnServe, writeTokensFile, type ServeProcess } from './support/serve-process.js';
import { ACME_A, TOKENS, testTokensFile, waitFor } from './support/service-world.js';

/*
 * `serve` through the crash tests' own entry (support/crash-cli.ts: the same
 * main with the durable-boundary seam armed): the relay SIGKILLs the whole
 * service at P2, after the publish intent is recorded and before salt-api is
 * called. A restarted service must never publish that request: it stays
 * published-uncertain (publishing) and is only polled.
 */

let CRASH_CLI: string;
let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;
const running: ServeProcess[] = [];

beforeAll(async () => {
  assertBuilt();
  CRASH_CLI = await buildCrashCli();
}, 60_000);
afterAll(() => removeCrashCli(CRASH_CLI));
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-crash-'));
  chmodSync(dir, 0o700);
  env = { ...cliEnv(dir, standIn), ODUFLOW_TOKENS_FILE: writeTokensFile(dir, testTokensFile()), ODUFLOW_POLL_WALK_INTERVAL_MS: '200', ODUFLOW_CALL_TIMEOUT_MS: '10000' };
});
afterEach(async () => {
  for (const p of running.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exited;
  }
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('serve killed at a durable boundary', () => {
  it('never publishes a request whose publish intent was recorded before a SIGKILL (P2), after a restart either', async () => {
    const crashing = spawnServe(env, [], CRASH_CLI, ['P2']);
    running.push(crashing);
    const address = await crashing.address;
    const response = await fetch(`${address}/v1/requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': 'crash-key', 'content-type': 'application/json' },
      body: JSON.stringify({ minion_id: ACME_A, profile: 'configure' }),
    });
    // The answer may or may not have left before the relay killed the process.
    const admittedId = response.status === 202 ? ((await response.json()) as ProtocolRequestRecord).request_id : undefined;
    expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const store = await createFileRecordStore({ root: join(dir, 'store'), create: false });
    const [record] = (await store.list()) as ProtocolRequestRecord[];
    await store.close();
    expect(record).toMatchObject({ state: 'publishing', publish_attempts: 1 });
    if (admittedId !== undefined) expect(record?.request_id).toBe(admittedId);

    const restarted = spawnServe(env);
    running.push(restarted);
    const again = await restarted.address;
    // The dead relay's claim on the outbox entry lapses only after its lease (120 s): the entry stays meanwhile, and is only ever dropped.
    expect(readdirSync(join(dir, 'store', 'outbox'))).toHaveLength(1);
    await waitFor(() => standIn.calls.some((c) => c.fun === 'oduflow_job.status'), 10_000, 'the restarted poller asked the minion');
    const shown = await fetch(`${again}/v1/requests/${record?.request_id}`, { headers: { authorization: `Bearer ${TOKENS.acmeRead}` } });
    expect(await shown.json()).toMatchObject({ state: 'publishing' });
    expect(standIn.publications).toEqual([]);
    restarted.child.kill('SIGTERM');
    expect((await restarted.exited).code).toBe(EXIT.ok);
  });
});
