import { moduleSha256 } from '@oduflow/minion-wrapper';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  GOOD_CAPABILITIES,
  OLD_CAPABILITIES,
  STANDIN_MODULE_SHA256,
  refusedUrl,
  startSaltApiStandIn,
  type CallReply,
  type SaltApiStandIn,
} from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../src/exit-codes.js';
import { assertBuilt, cliEnv, jsonOf, runCli } from './support/cli.js';

const READY = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const NOT_READY = 'client-1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
const SILENT = 'client-2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b';
const OLD = 'client-3f4a5b6c-7d8e-4f9a-8b1c-2d3e4f5a6b7c';

let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;

beforeAll(() => assertBuilt());
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-fleet-'));
  chmodSync(dir, 0o700);
  env = cliEnv(dir, standIn);
});
afterEach(async () => {
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

function fleet(replies: Record<string, CallReply>): void {
  standIn.acceptedKeys = Object.keys(replies);
  standIn.capabilities = (id) => replies[id] ?? { noReturn: true };
}

const pinned = ['--expected-sha256', STANDIN_MODULE_SHA256];

describe('oduflow-master verify-fleet', () => {
  it('exits 0 when every client minion is ready, with one row each in a table and the same fields in JSON', async () => {
    fleet({ [READY]: { retcode: 0, ret: GOOD_CAPABILITIES }, [NOT_READY]: { retcode: 0, ret: GOOD_CAPABILITIES } });
    const json = await runCli(['verify-fleet', ...pinned, '--json'], env);
    expect(json.code).toBe(EXIT.ok);
    expect(jsonOf(json)).toStrictEqual({
      outcome: 'ready',
      minions: 2,
      ready: 2,
      ignored_keys: 0,
      expected_sha256: STANDIN_MODULE_SHA256,
      records: [READY, NOT_READY].map((minion_id) => ({
        minion_id,
        status: 'ready',
        module_version: '1.1.0',
        salt_version: '3006.27',
        module_sha256: STANDIN_MODULE_SHA256,
        reasons: null,
      })),
    });
    const table = await runCli(['verify-fleet', ...pinned], env);
    expect(table.code).toBe(EXIT.ok);
    expect(table.stdout).toContain('verify-fleet: 2 of 2 minion(s) ready');
    for (const field of ['minion_id', 'status', 'module_version', 'salt_version', 'module_sha256', 'reasons']) expect(table.stdout).toContain(field);
    expect(existsSync(join(dir, 'store'))).toBe(false); // read-only: no store
  });

  it('exits 2 with a row for each finding: not ready (reasons), older module, module missing, digest differs', async () => {
    fleet({
      [READY]: { retcode: 0, ret: { ...GOOD_CAPABILITIES, module_sha256: 'e'.repeat(64) } },
      [NOT_READY]: { retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['pillar_cache', 'sudo_user'] } },
      [SILENT]: { retcode: 1, ret: "'oduflow_job.capabilities' is not available." },
      [OLD]: { retcode: 0, ret: OLD_CAPABILITIES },
    });
    const run = await runCli(['verify-fleet', ...pinned, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({
      outcome: 'not_ready',
      ready: 0,
      records: [
        { minion_id: READY, status: 'digest_differs', module_sha256: 'e'.repeat(64) },
        { minion_id: NOT_READY, status: 'not_ready', reasons: 'pillar_cache,sudo_user' },
        { minion_id: SILENT, status: 'module_missing' },
        { minion_id: OLD, status: 'older_module', module_version: '1.0.0' },
      ],
    });
  });

  it('exits 3 when the only problem is a minion that did not answer', async () => {
    fleet({ [READY]: { retcode: 0, ret: GOOD_CAPABILITIES }, [SILENT]: { noReturn: true } });
    const run = await runCli(['verify-fleet', ...pinned, '--json'], env);
    expect(run.code).toBe(EXIT.unresolved);
    expect(jsonOf(run)).toMatchObject({ records: [{ minion_id: READY, status: 'ready' }, { minion_id: SILENT, status: 'no_answer' }] });
  });

  it('asks only the named minions (repeatable --minion), a named minion without an accepted key is no_target (exit 2)', async () => {
    fleet({ [READY]: { retcode: 0, ret: GOOD_CAPABILITIES }, [NOT_READY]: { noReturn: true } });
    const run = await runCli(['verify-fleet', ...pinned, '--minion', READY, '--minion', OLD, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(standIn.calls).toMatchObject([{ fun: 'oduflow_job.capabilities', tgtType: 'list', tgt: [READY, OLD] }]);
    expect(jsonOf(run)).toMatchObject({ records: [{ minion_id: READY, status: 'ready' }, { minion_id: OLD, status: 'no_target' }] });
  });

  it('holds the fleet to the module shipped in @oduflow/minion-wrapper by default', async () => {
    fleet({ [READY]: { retcode: 0, ret: { ...GOOD_CAPABILITIES, module_sha256: moduleSha256() } }, [NOT_READY]: { retcode: 0, ret: GOOD_CAPABILITIES } });
    const run = await runCli(['verify-fleet', '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({
      expected_sha256: moduleSha256(),
      records: [
        { minion_id: READY, status: 'ready' },
        { minion_id: NOT_READY, status: 'digest_differs' },
      ],
    });
  });

  it('exits 3 for an empty fleet: nothing was verified', async () => {
    fleet({});
    const run = await runCli(['verify-fleet', ...pinned, '--json'], env);
    expect(run.code).toBe(EXIT.unresolved);
    expect(jsonOf(run)).toMatchObject({ minions: 0, records: [] });
  });

  it('exits 3 when salt-api cannot be reached', async () => {
    const run = await runCli(['verify-fleet', ...pinned, '--json'], { ...env, ODUFLOW_SALT_API_URL: await refusedUrl() });
    expect(run.code).toBe(EXIT.unresolved);
    expect(jsonOf(run)).toMatchObject({ outcome: 'unreachable', failure: 'connection_refused', records: [] });
  });

  it.each([
    [['--minion', 'bogus'], 'invalid_minion_id'],
    [['--expected-sha256', 'ABC'], 'invalid_expected_sha256'],
  ])('refuses %j before asking anything (exit 2)', async (args, detail) => {
    const run = await runCli(['verify-fleet', ...args, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'invalid_input', detail } });
    expect(standIn.calls).toHaveLength(0);
  });
});
