import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  GOOD_CAPABILITIES,
  refusedUrl,
  startSaltApiStandIn,
  type SaltApiStandIn,
} from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../src/exit-codes.js';
import { assertBuilt, cliEnv, jsonOf, runCli } from './support/cli.js';
import { buildCrashCli, removeCrashCli } from './support/crash-entry.js';

/*
 * What an operator sees of readiness and refusals (issue 8): a minion that is
 * not ready is rejected with its reasons; a minion that could not be asked
 * burns nothing; a refusal frees the target and says why; a repeated dispatch
 * of a request still in flight is not "done".
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
  dir = mkdtempSync(join(tmpdir(), 'oduflow-cli8-'));
  chmodSync(dir, 0o700);
  env = cliEnv(dir, standIn);
});
afterEach(async () => {
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

const dispatchArgs = (requestId = REQUEST, profile = 'configure') => ['dispatch', '--minion', MINION, '--profile', profile, '--request-id', requestId, '--json'];

describe('dispatch checks readiness before anything is published', () => {
  it('rejects a minion that is not ready with its reasons (exit 2), and says so in show and list', async () => {
    standIn.capabilities = () => ({ retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['multiprocessing', 'cache_jobs'] } });
    const run = await runCli(dispatchArgs(), env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ outcome: 'rejected', reason: 'not_ready', reason_detail: 'multiprocessing,cache_jobs' });
    expect(standIn.publications).toHaveLength(0);
    expect(jsonOf(await runCli(['show', REQUEST, '--json'], env))).toMatchObject({
      record: { state: 'rejected', reason: 'not_ready', reason_detail: 'multiprocessing,cache_jobs' },
    });
    const table = await runCli(['list'], env);
    expect(table.stdout).toContain('not_ready');
    expect(table.stdout).toContain('multiprocessing,cache_jobs');
  });

  it.each([
    ['no return', { noReturn: true as const }, 'no_return'],
    ['a salt-api failure', { httpStatus: 502 }, 'server_error'],
  ])('records nothing when the capability call gets %s (exit 3), and the same request id goes through later', async (_label, reply, detail) => {
    standIn.capabilities = () => reply;
    const run = await runCli(dispatchArgs(), env);
    expect(run.code).toBe(EXIT.unresolved);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'minion_unreachable', detail, request_id: REQUEST } });
    expect(jsonOf(await runCli(['show', REQUEST, '--json'], env))).toMatchObject({ error: { code: 'not_found' } });

    standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
    const again = await runCli(dispatchArgs(), env);
    expect(again.code).toBe(EXIT.ok);
    expect(jsonOf(again)).toMatchObject({ outcome: 'published', records: [{ request_id: REQUEST, state: 'published' }] });
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
  });

  it('records nothing when salt-api is down (exit 3), and creates no store for it', async () => {
    const run = await runCli(dispatchArgs(), { ...env, ODUFLOW_SALT_API_URL: await refusedUrl() });
    expect(run.code).toBe(EXIT.unresolved);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'minion_unreachable', detail: 'connection_refused' } });
    expect(existsSync(join(dir, 'store', 'requests', `${REQUEST}.json`))).toBe(false);
  });

  it('records nothing for a minion without an accepted key (exit 2)', async () => {
    standIn.capabilities = () => ({ noTarget: true });
    const run = await runCli(dispatchArgs(), env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'no_target', request_id: REQUEST } });
    expect(existsSync(join(dir, 'store', 'requests', `${REQUEST}.json`))).toBe(false);
  });
});

describe('dispatch --request-id of a request that exists', () => {
  it.each([
    ['published', 'ack' as const, EXIT.unresolved],
    ['publishing (uncertain)', 'error_500' as const, EXIT.unresolved],
  ])('exits 3 while it is %s: this call did not publish it', async (_label, mode, code) => {
    standIn.publishMode = mode;
    await runCli(dispatchArgs(), env);
    const again = await runCli(dispatchArgs(), env);
    expect(again.code).toBe(code);
    expect(jsonOf(again)).toMatchObject({ outcome: 'existing' });
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
  });

  it('exits 3 while it is prepared, and the blocked target names publish-pending', async () => {
    // A crash right after the record was persisted (P1) leaves it prepared.
    expect((await runCli(['P1', ...dispatchArgs()], env, CRASH_CLI)).signal).toBe('SIGKILL');
    const again = await runCli(dispatchArgs(), env);
    expect(again.code).toBe(EXIT.unresolved);
    expect(jsonOf(again)).toMatchObject({ outcome: 'existing', records: [{ state: 'prepared' }] });
    expect(standIn.publications).toHaveLength(0);

    const blocked = await runCli(['dispatch', '--minion', MINION, '--profile', 'production', '--request-id', SECOND], env);
    expect(blocked.code).toBe(EXIT.refused);
    expect(blocked.stderr).toContain('error [target_blocked/prepared]');
    expect(blocked.stderr).toContain('publish it with publish-pending');
  });

  it('exits 0 once it is settled, and 2 when it was rejected', async () => {
    await runCli(dispatchArgs(), env);
    await runCli(['poll', '--json'], env);
    expect((await runCli(dispatchArgs(), env)).code).toBe(EXIT.ok);

    standIn.capabilities = () => ({ retcode: 1, ret: "'oduflow_job.capabilities' is not available." });
    await runCli(dispatchArgs(SECOND), env);
    const again = await runCli(dispatchArgs(SECOND), env);
    expect(again.code).toBe(EXIT.refused);
    expect(jsonOf(again)).toMatchObject({ outcome: 'existing', records: [{ state: 'rejected', reason: 'capability_missing' }] });
  });
});

describe('poll when the minion refused the publication', () => {
  it('records rejected with why, frees the target, and shows it in show and list', async () => {
    standIn.result = { status: 'refused', passed: 0, total: 0, reason: 'execution_busy' };
    expect((await runCli(dispatchArgs(), env)).code).toBe(EXIT.ok);
    const polled = await runCli(['poll', '--json'], env);
    expect(polled.code).toBe(EXIT.ok);
    expect(jsonOf(polled)).toMatchObject({ records: [{ request_id: REQUEST, state: 'rejected', observed: 'refused: execution_busy', reason: 'refused', reason_detail: 'execution_busy' }] });
    expect(jsonOf(await runCli(['show', REQUEST, '--json'], env))).toMatchObject({
      record: { state: 'rejected', reason: 'refused', reason_detail: 'execution_busy', last_observation: expect.stringMatching(/^refused: execution_busy at /) as unknown },
    });
    expect((await runCli(['list'], env)).stdout).toContain('execution_busy');
    expect(jsonOf(await runCli(['list', '--unresolved', '--json'], env))).toEqual({ records: [] });

    standIn.result = { status: 'succeeded', passed: 60, total: 60 };
    const next = await runCli(dispatchArgs(SECOND, 'production'), env);
    expect(next.code).toBe(EXIT.ok);
    expect(jsonOf(next)).toMatchObject({ outcome: 'published' });
  });

  it('records every error answer as the last observation, a code this master does not know as sent', async () => {
    expect((await runCli(dispatchArgs(), env)).code).toBe(EXIT.ok);
    standIn.status = () => ({ retcode: 1, ret: { protocol: 1, error: 'inconsistent_evidence', message: 'x' } });
    expect((await runCli(['poll', '--json'], env)).code).toBe(EXIT.unresolved);
    expect(jsonOf(await runCli(['show', REQUEST, '--json'], env))).toMatchObject({
      record: { state: 'published', reason: 'minion_error', reason_detail: 'inconsistent_evidence', last_observation: expect.stringMatching(/^error: inconsistent_evidence at /) as unknown },
    });
    standIn.status = () => ({ retcode: 1, ret: { protocol: 1, error: 'brand_new_code', message: 'x' } });
    expect(jsonOf(await runCli(['poll', '--json'], env))).toMatchObject({ records: [{ observed: 'error: brand_new_code', reason_detail: 'brand_new_code' }] });
  });
});

describe('preflight reports what legacy records say', () => {
  it('names the target and the recorded state, and a legacy record that names no target as such', async () => {
    mkdirSync(join(dir, 'store', 'requests'), { recursive: true, mode: 0o700 });
    chmodSync(join(dir, 'store'), 0o700);
    writeFileSync(join(dir, 'store', 'requests', 'old-1.json'), JSON.stringify({ minion_id: MINION, status: 'dispatched', out: 'SECRET-OUTPUT' }), { mode: 0o600 });
    writeFileSync(join(dir, 'store', 'requests', 'old-2.json'), JSON.stringify({ host: 'web-01', state: 'sent' }), { mode: 0o600 });
    expect((await runCli(['migrate-store'], env)).code).toBe(EXIT.ok); // a store of an older release: indexed once
    const run = await runCli(['preflight', '--json'], env);
    expect(run.code).toBe(EXIT.unresolved);
    expect(jsonOf(run)).toMatchObject({
      clean: false,
      legacy: 2,
      records: [
        { finding: 'legacy', request_id: 'old-1', minion_id: MINION, recorded_state: 'dispatched', note: 'blocks its target', state: 'legacy' },
        { finding: 'legacy', request_id: 'old-2', minion_id: null, recorded_state: 'sent', note: 'names no target: blocks every target', state: 'legacy' },
      ],
    });
    const table = await runCli(['preflight'], env);
    expect(table.stdout).toContain('names no target: blocks every target');
    expect(table.stdout + run.stdout).not.toContain('SECRET-OUTPUT');
  });
});
