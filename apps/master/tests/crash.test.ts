import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { assertBuilt, jsonOf, runCli, type CliRun, cliEnv } from './support/cli.js';
import { buildCrashCli, removeCrashCli } from './support/crash-entry.js';

/*
 * DESIGN §6, master side: the real CLI (main) in a real process SIGKILLs
 * itself at P1–P4, and inside the file store's create at S1/S2, then the
 * shipped executable is run again to recover. The seam is armed only by a
 * test-only entry (support/crash-cli.ts, bundled here before the tests): the
 * shipped dist/cli.js cannot be made to crash, whatever its environment. The
 * stand-in counts publications per request; the record on disk is read back
 * after each step.
 */


const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';
const SECOND = '1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5';

let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;

let CRASH_CLI: string;
beforeAll(async () => {
  assertBuilt();
  CRASH_CLI = await buildCrashCli();
}, 60_000);
afterAll(() => removeCrashCli(CRASH_CLI));
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-crash-'));
  chmodSync(dir, 0o700);
  env = cliEnv(dir, standIn);
});
afterEach(async () => {
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

function onDisk(): Record<string, unknown> {
  return JSON.parse(readFileSync(join(dir, 'store', 'requests', `${REQUEST}.json`), 'utf8')) as Record<string, unknown>;
}

const dispatchArgs = ['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST, '--json'];

async function crashAt(point: string, args: readonly string[]): Promise<CliRun> {
  const run = await runCli([point, ...args], env, CRASH_CLI);
  expect(run.signal).toBe('SIGKILL');
  return run;
}

function recordsOf(run: CliRun): Record<string, unknown>[] {
  return jsonOf(run)['records'] as Record<string, unknown>[];
}

describe('the shipped executable', () => {
  it.each(['P1', 'P2', 'S1'])('never crashes itself at %s, whatever its environment says', async (point) => {
    const run = await runCli(dispatchArgs, { ...env, ODUFLOW_TEST_CRASH_AT: point, NODE_OPTIONS: '' });
    expect(run.signal).toBeNull();
    expect(run.code).toBe(0);
    expect(onDisk()).toMatchObject({ state: 'published' });
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
  });
});

describe('crash points of the master (real CLI, SIGKILL)', () => {
  it('P1: a record persisted without intent is published later once, and polled to the receipt', async () => {
    await crashAt('P1', dispatchArgs);
    expect(onDisk()).toMatchObject({ state: 'prepared', publish_attempts: 0 });
    expect(standIn.publicationsOf(REQUEST)).toBe(0);
    const jid = onDisk()['jid'];

    const published = await runCli(['publish-pending', '--json'], env);
    expect(published.code).toBe(0);
    expect(recordsOf(published)).toMatchObject([{ request_id: REQUEST, outcome: 'published', state: 'published', jid }]);

    const polled = await runCli(['poll', '--json'], env);
    expect(polled.code).toBe(0);
    expect(recordsOf(polled)).toMatchObject([{ request_id: REQUEST, state: 'succeeded', passed: 60, total: 60 }]);

    expect(recordsOf(await runCli(['publish-pending', '--json'], env))).toEqual([]);
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
    expect(standIn.publicationsUnder(jid as string)).toBe(1);
  });

  it('P2: an intent persisted before Salt was called stays published-uncertain and is never published', async () => {
    await crashAt('P2', dispatchArgs);
    expect(onDisk()).toMatchObject({ state: 'publishing', publish_attempts: 1 });

    expect(recordsOf(await runCli(['publish-pending', '--json'], env))).toEqual([]);
    const polled = await runCli(['poll', '--json'], env);
    expect(polled.code).toBe(3);
    expect(recordsOf(polled)).toMatchObject([{ request_id: REQUEST, state: 'publishing', observed: 'not_started' }]);

    const blocked = await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', SECOND, '--json'], env);
    expect(blocked.code).toBe(2);
    expect(jsonOf(blocked)).toMatchObject({ error: { code: 'target_blocked', request_id: REQUEST } });
    expect(standIn.publications).toHaveLength(0);

    const reconciled = await runCli(['reconcile', REQUEST, '--reason', 'nothing ran: checked the minion', '--actor', 'ops', '--json'], env);
    expect(reconciled.code).toBe(0);
    expect(jsonOf(reconciled)).toMatchObject({ record: { state: 'reconciled', reconciled_by: 'ops' } });
    expect(standIn.publications).toHaveLength(0);
  });

  it('P3: a publication whose ack was never recorded is polled to the receipt, never published again', async () => {
    await crashAt('P3', dispatchArgs);
    expect(onDisk()).toMatchObject({ state: 'publishing' });
    expect(standIn.publicationsOf(REQUEST)).toBe(1);

    expect(recordsOf(await runCli(['publish-pending', '--json'], env))).toEqual([]);
    const polled = await runCli(['poll', '--json'], env);
    expect(polled.code).toBe(0);
    expect(recordsOf(polled)).toMatchObject([{ state: 'succeeded', passed: 60, total: 60 }]);
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
  });

  it('P4: a status fetched but not committed is committed by the next poll, with the same result', async () => {
    standIn.result = { status: 'failed', passed: 57, total: 60 };
    expect((await runCli(dispatchArgs, env)).code).toBe(0);
    await crashAt('P4', ['poll', '--json']);
    expect(onDisk()).toMatchObject({ state: 'published', passed: 0, total: 0 });

    const polled = await runCli(['poll', '--request-id', REQUEST, '--json'], env);
    expect(polled.code).toBe(0);
    expect(recordsOf(polled)).toMatchObject([{ state: 'failed', passed: 57, total: 60 }]);
    expect(onDisk()).toMatchObject({ state: 'failed', passed: 57, total: 60 });
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
  });

  // S1–S6, the file store's own boundaries, are SIGKILLed in a real process by
  // packages/master-runner/tests/file-store-crash.test.ts: the store's seam is an
  // option of createFileRecordStore, never armed by ODUFLOW_TEST_CRASH_AT.
});
