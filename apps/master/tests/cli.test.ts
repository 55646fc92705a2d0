import { MASTER_RUNNER_ERROR_CODES } from '@oduflow/master-runner';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  GOOD_CAPABILITIES,
  STANDIN_MODULE_SHA256,
  startSaltApiStandIn,
  type SaltApiStandIn,
} from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { writePasswordFile } from '../../../packages/master-runner/tests/support/harness.js';
import { EXIT, EXIT_FOR_ERROR } from '../src/exit-codes.js';
import { CLI, assertBuilt, jsonOf, runCli, type CliRun, cliEnv } from './support/cli.js';

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';

let standIn: SaltApiStandIn;
let dir: string;
let store: string;
let env: Record<string, string>;

beforeAll(() => assertBuilt());
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-cli-'));
  chmodSync(dir, 0o700);
  store = join(dir, 'store');
  env = cliEnv(dir, standIn);
});
afterEach(async () => {
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('exit code table', () => {
  it('maps every runner error code to an exit status', () => {
    for (const code of MASTER_RUNNER_ERROR_CODES) expect([EXIT.internal, EXIT.refused, EXIT.unresolved]).toContain(EXIT_FOR_ERROR[code]);
  });

  it('calls unresolved only a minion that could not be asked', () => {
    expect(MASTER_RUNNER_ERROR_CODES.filter((code) => EXIT_FOR_ERROR[code] === EXIT.unresolved)).toStrictEqual(['minion_unreachable']);
  });
});

describe('oduflow-master dispatch, poll, show and list', () => {
  it('dispatches and polls with tables for people and the same fields in JSON', async () => {
    const dispatched = await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST], env);
    expect(dispatched.code).toBe(EXIT.ok);
    expect(dispatched.stdout).toContain('dispatch: published');
    expect(dispatched.stdout).toContain(REQUEST);

    const polled = await runCli(['poll', '--watch', '--interval', '100'], env);
    expect(polled.code).toBe(EXIT.ok);
    expect(polled.stdout).toContain('succeeded');

    const shown = jsonOf(await runCli(['show', REQUEST, '--json'], env));
    expect(shown['record']).toMatchObject({ request_id: REQUEST, minion_id: MINION, state: 'succeeded', passed: 60, total: 60, role: 'roles.client_stack' });
    const table = await runCli(['show', REQUEST], env);
    for (const field of Object.keys(shown['record'] as object)) expect(table.stdout).toContain(field);
    // The history: what dispatch and poll committed, in order, each with its time and source, in JSON and in the table.
    const history = shown['history'] as { kept: boolean; dropped: number; entries: Record<string, unknown>[] };
    expect(history).toMatchObject({ kept: true, dropped: 0 });
    expect(history.entries.map((e) => [e['seq'], e['event'], e['source'], e['to_state']])).toEqual([
      [1, 'created', 'dispatch', 'prepared'],
      [2, 'intent_recorded', 'dispatch', 'publishing'],
      [3, 'publish_acked', 'dispatch', 'published'],
      [4, 'observed', 'poller', 'succeeded'],
    ]);
    expect(history.entries.at(-1)).toMatchObject({ observed: 'succeeded', at: (shown['record'] as { updated_at: string }).updated_at });
    for (const field of ['seq', 'from_state', 'to_state', 'event', 'source', 'observed', 'reason_code']) expect(table.stdout).toContain(field);
    expect(table.stdout).toContain('intent_recorded');
    expect(table.stdout).toContain(history.entries[0]?.['at'] as string);

    const listed = jsonOf(await runCli(['list', '--minion', MINION, '--json'], env));
    expect(listed['records']).toMatchObject([{ request_id: REQUEST, state: 'succeeded' }]);
    expect(jsonOf(await runCli(['list', '--unresolved', '--json'], env))['records']).toEqual([]);
  });

  it('logs JSON on stderr with request_id, minion_id, jid and state, and never the password or state data', async () => {
    const file = join(dir, 'high.json');
    writeFileSync(file, '{"motd":{"file.managed":[{"contents":"top-secret-contents"},{"name":"/etc/motd"}]}}\n');
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'custom', '--state-data-file', file, '--request-id', REQUEST], env);
    expect(run.code).toBe(EXIT.ok);
    const lines = run.stderr.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.some((l) => l['request_id'] === REQUEST && l['minion_id'] === MINION && typeof l['jid'] === 'string' && l['state'] === 'published')).toBe(true);
    for (const output of [run.stderr, run.stdout]) {
      expect(output).not.toContain('top-secret-contents');
      expect(output).not.toContain(standIn.password);
    }
  });

  it('exits 3 when a publication is uncertain and 2 when the target is then blocked', async () => {
    standIn.publishMode = 'error_500';
    const first = await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST, '--json'], env);
    expect(first.code).toBe(EXIT.unresolved);
    expect(jsonOf(first)).toMatchObject({ outcome: 'publish_uncertain', reason: 'server_error' });
    const second = await runCli(['dispatch', '--minion', MINION, '--profile', 'production', '--json'], env);
    expect(second.code).toBe(EXIT.refused);
    expect(jsonOf(second)).toMatchObject({ error: { code: 'target_blocked' } });
  });

  it('exits 2 and records rejected when the minion lacks the capability', async () => {
    standIn.capabilities = () => ({ retcode: 1, ret: "'oduflow_job.capabilities' is not available." });
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ outcome: 'rejected', reason: 'capability_missing' });
    expect(standIn.publications).toHaveLength(0);
  });

  it('lists legacy records in preflight and exits 3 until they are reconciled', async () => {
    expect((await runCli(['preflight'], env)).code).toBe(EXIT.ok);
    expect(existsSync(store)).toBe(false); // preflight creates nothing
    mkdirSync(join(store, 'requests'), { recursive: true, mode: 0o700 });
    writeFileSync(join(store, 'requests', 'old-7.json'), JSON.stringify({ minion_id: MINION, state: 'sent' }), { mode: 0o600 });
    expect((await runCli(['migrate-store'], env)).code).toBe(EXIT.ok); // a store of an older release: indexed once
    const before = await runCli(['preflight', '--json'], env);
    expect(before.code).toBe(EXIT.unresolved);
    expect(jsonOf(before)).toMatchObject({ clean: false, legacy: 1, records: [{ finding: 'legacy', request_id: 'old-7', state: 'legacy' }] });
    expect((await runCli(['reconcile', 'old-7', '--reason', 'old run verified'], env)).code).toBe(EXIT.ok);
    expect((await runCli(['preflight'], env)).code).toBe(EXIT.ok);
  });
});

describe('oduflow-master refuses bad input with a stable code and writes nothing', () => {
  it.each([
    [['dispatch', '--minion', 'client-NOT-A-UUID', '--profile', 'configure'], 'invalid_minion_id'],
    [['dispatch', '--minion', MINION, '--profile', 'everything'], 'invalid_profile'],
    [['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', '6F1C2B8E-4D3A-4B5C-9E7F-0A1B2C3D4E5F'], 'invalid_request_id'],
  ])('%j names %s', async (args, detail) => {
    const run = await runCli([...args, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'invalid_input', detail } });
    expect(existsSync(store)).toBe(false);
    expect(standIn.calls).toHaveLength(0);
  });

  it('refuses non-canonical state data without echoing it', async () => {
    const file = join(dir, 'high.json');
    writeFileSync(file, '{"motd": {"file.managed": [{"contents": "leak-me"}]}}');
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'custom', '--state-data-file', file, '--json'], env);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'invalid_input', detail: 'non_canonical_json' } });
    expect(run.stdout + run.stderr).not.toContain('leak-me');
    expect(existsSync(store)).toBe(false);
  });

  it('refuses a password file with a loose mode before opening the store', async () => {
    const loose = writePasswordFile(dir, standIn.password, 0o640);
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--json'], { ...env, ODUFLOW_SALT_API_PASSWORD_FILE: loose });
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'credentials_insecure' } });
    expect(run.stdout + run.stderr).not.toContain(standIn.password);
    expect(existsSync(store)).toBe(false);
  });

  it('refuses a store directory that is a symlink', async () => {
    mkdirSync(join(dir, 'elsewhere'), { mode: 0o700 });
    symlinkSync(join(dir, 'elsewhere'), store);
    const run = await runCli(['list', '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'store_unsafe' } });
  });

  it('exits 2 on an unknown command or a missing required option', async () => {
    expect((await runCli(['explode'], env)).code).toBe(EXIT.refused);
    expect((await runCli(['dispatch', '--minion', MINION], env)).code).toBe(EXIT.refused);
    expect((await runCli(['reconcile', REQUEST], env)).code).toBe(EXIT.refused);
  });

  it('exits 2 for a request it does not know', async () => {
    const run = await runCli(['show', REQUEST, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'not_found' } });
  });
});

describe('oduflow-master never repeats what salt-api sent', () => {
  it('keeps a marker from salt-api bodies of unexpected shapes out of stdout, stderr and the records', async () => {
    const marker = `MARKER-${Date.now().toString(36)}-secret`;
    const debug = { ...env, ODUFLOW_LOG_LEVEL: 'debug' };
    const runs: { stdout: string; stderr: string }[] = [];
    const cli = async (args: string[]) => {
      const run = await runCli(args, debug);
      runs.push(run);
      return run;
    };
    const ids = ['0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', '1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e', REQUEST];

    // A login answered 500 with the marker, then 200 with the marker where the token belongs.
    standIn.loginReply = () => ({ status: 500, body: JSON.stringify({ status: 500, message: marker, return: [marker] }) });
    for (const json of [[], ['--json']]) {
      expect((await cli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', ids[0] as string, ...json])).code).toBe(EXIT.unresolved);
    }
    standIn.loginReply = () => ({ status: 200, body: JSON.stringify({ return: [{ token: { value: marker }, expire: marker, perms: [marker] }] }) });
    expect((await cli(['dispatch', '--minion', MINION, '--profile', 'configure', '--json'])).code).toBe(EXIT.unresolved);
    standIn.loginReply = undefined;

    // A capabilities answer that carries the marker in fields the protocol does not have.
    standIn.capabilities = () => ({ retcode: 0, ret: { protocol: 1, module_version: marker, salt_version: [marker], extra: marker } });
    expect((await cli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', ids[1] as string])).code).toBe(EXIT.refused);
    standIn.acceptedKeys = [MINION];
    for (const args of [[], ['--minion', MINION], ['--json']]) {
      expect((await cli(['verify-fleet', '--expected-sha256', STANDIN_MODULE_SHA256, ...args])).code).toBe(EXIT.refused);
    }
    standIn.acceptedKeys = undefined;
    standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });

    // A publication acknowledged with the marker instead of our JID and minion.
    standIn.publishMode = 'raw';
    standIn.publishBody = JSON.stringify({ return: [{ jid: marker, minions: [marker], [marker]: marker }] });
    expect((await cli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST])).code).toBe(EXIT.unresolved);

    // Status answers of every wrong shape, each carrying the marker.
    const shapes = [
      { retcode: 0, ret: { protocol: 1, status: marker, message: marker } },
      { retcode: 0, ret: { protocol: 1, status: 'refused', reason: marker, minion_id: MINION } },
      { retcode: 1, ret: { protocol: 1, error: 'unsafe_store', message: marker } },
      { retcode: 1, ret: { protocol: 1, error: marker, message: marker } },
      { retcode: 0, ret: marker },
      { body: `<html>${marker}</html>` },
      { body: JSON.stringify({ return: [{ [MINION]: { ret: { traceback: marker }, retcode: marker } }] }) },
      { httpStatus: 500 },
    ];
    // A read answered 500 is retried (twice by default); the last shape stays, so retries meet it again.
    let next = 0;
    standIn.status = () => shapes[Math.min(next++, shapes.length - 1)] as never;
    for (let i = 0; i < shapes.length; i += 1) {
      expect((await cli(['poll', '--request-id', REQUEST, ...(i % 2 === 0 ? ['--json'] : [])])).code).toBe(EXIT.unresolved);
    }
    await cli(['show', REQUEST]);
    await cli(['show', REQUEST, '--json']);
    await cli(['list']);
    await cli(['list', '--json']);
    await cli(['preflight']);

    // Every shape was met once, the 500 three times (first try and two retries); show, list and preflight ask nothing.
    expect(next).toBe(shapes.length + 2);
    const everything = runs.map((r) => r.stdout + r.stderr).join('\n');
    // Each shape was met and classified by a stable code, not echoed.
    for (const code of [
      'minion_unreachable/server_error',
      '"code":"minion_unreachable","detail":"malformed_response"',
      'capability_unsupported',
      'invalid_capabilities',
      'jid_mismatch',
      'error: unsafe_store',
      'failure: invalid_error_answer',
      'failure: invalid_status_answer',
      'failure: malformed_response',
      'failure: server_error',
    ]) {
      expect(everything).toContain(code);
    }
    expect(everything).not.toContain(marker);
    expect(everything).not.toContain(standIn.password);
    for (const token of standIn.tokensIssued) expect(everything).not.toContain(token);
    const stored = ids.map((id) => (existsSync(join(store, 'requests', `${id}.json`)) ? readFileSync(join(store, 'requests', `${id}.json`), 'utf8') : ''));
    expect(stored.join('\n')).not.toContain(marker);
  });
});

const OTHER_MINION = 'client-1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
const OTHER_REQUEST = '7a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';

/** Runs the CLI and calls `onStderr` with everything it wrote to stderr so far, so a test can act mid-run. */
function runCliWith(args: readonly string[], onStderr: (stderr: string, kill: (signal: NodeJS.Signals) => void) => void): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      onStderr(stderr, (signal) => child.kill(signal));
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

describe('oduflow-master poll --watch ends', () => {
  beforeEach(async () => {
    expect((await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST], env)).code).toBe(EXIT.ok);
    // MINION's status calls fail for ever: its request stays published.
    standIn.status = (_args, minionId, simulated) => (minionId === MINION ? { httpStatus: 500 } : simulated);
  });

  it('stops at --timeout with the latest report (exit 3), watches only the first round, and prints progress on stderr', async () => {
    let dispatchedLater: Promise<CliRun> | undefined;
    const run = await runCliWith(['poll', '--watch', '--interval', '100', '--timeout', '2500', '--log-level', 'silent'], (stderr) => {
      // A request dispatched after the first round is not watched.
      if (dispatchedLater === undefined && stderr.includes('poll: round 1:')) {
        dispatchedLater = runCli(['dispatch', '--minion', OTHER_MINION, '--profile', 'configure', '--request-id', OTHER_REQUEST], env);
      }
    });
    expect((await dispatchedLater)?.code).toBe(EXIT.ok);
    expect(run.code).toBe(EXIT.unresolved);
    expect(run.stderr).toMatch(/poll: round 1: 0 settled, 1 waiting 6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f=published/);
    expect(run.stderr).toContain('poll: round 2:');
    expect(run.stdout).toContain('watch stopped: timeout');
    expect(run.stdout).toContain(REQUEST);
    expect(run.stdout).not.toContain(OTHER_REQUEST);
    expect(run.stdout).not.toContain('poll: round');

    const json = await runCli(['poll', '--watch', '--interval', '100', '--timeout', '500', '--json', '--log-level', 'silent'], env);
    expect(json.code).toBe(EXIT.unresolved);
    // Progress for programs: one JSON line per round on stderr; stdout stays the one final document.
    const rounds = json.stderr.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(rounds[0]).toStrictEqual({ progress: 'poll_round', round: 1, settled: 1, waiting: [{ request_id: REQUEST, state: 'published' }] });
    expect(rounds.map((r) => r['round'])).toStrictEqual(rounds.map((_r, i) => i + 1));
    expect(jsonOf(json)).toMatchObject({ stopped: 'timeout' });
    expect(jsonOf(json)['records']).toContainEqual(expect.objectContaining({ request_id: REQUEST, state: 'published' }));
  }, 20_000);

  it.each(['SIGINT', 'SIGTERM'] as const)('prints the latest report and exits 3 on %s', async (signal) => {
    let sent = false;
    const run = await runCliWith(['poll', '--watch', '--interval', '100', '--log-level', 'silent'], (stderr, kill) => {
      if (!sent && stderr.includes('poll: round 2:')) {
        sent = true;
        kill(signal);
      }
    });
    expect(run.signal).toBeNull();
    expect(run.code).toBe(EXIT.unresolved);
    expect(run.stdout).toContain('watch stopped: interrupted');
    expect(run.stdout).toContain(REQUEST);
  }, 20_000);

  it('still ends with exit 0 once every watched request is settled', async () => {
    standIn.status = (_args, _minionId, simulated) => simulated;
    const run = await runCli(['poll', '--watch', '--interval', '100', '--json'], env);
    expect(run.code).toBe(EXIT.ok);
    expect(jsonOf(run)).toMatchObject({ records: [{ request_id: REQUEST, state: 'succeeded' }] });
    expect(jsonOf(run)['stopped']).toBeUndefined();
  });
});

describe('oduflow-master reads the state data file safely', () => {
  it('refuses a FIFO without blocking, and a symlink, with invalid_input', async () => {
    const fifo = join(dir, 'high.fifo');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'custom', '--state-data-file', fifo, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'invalid_input', detail: 'invalid_high_data' } });

    const real = join(dir, 'high.json');
    writeFileSync(real, '{"motd":{"file.managed":[{"name":"/etc/motd"}]}}\n');
    const link = join(dir, 'link.json');
    symlinkSync(real, link);
    const linked = await runCli(['dispatch', '--minion', MINION, '--profile', 'custom', '--state-data-file', link, '--json'], env);
    expect(linked.code).toBe(EXIT.refused);
    expect(jsonOf(linked)).toMatchObject({ error: { code: 'invalid_input', message: expect.stringContaining('symlink') as unknown } });
    expect(existsSync(store)).toBe(false);
    expect(standIn.calls).toHaveLength(0);
  }, 10_000);

  it('refuses an oversized file by its size', async () => {
    const big = join(dir, 'big.json');
    writeFileSync(big, `"${'x'.repeat(70 * 1024)}"`);
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'custom', '--state-data-file', big, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'invalid_input', detail: 'high_data_too_large' } });
  });
});

describe('oduflow-master read-only and refused commands write nothing', () => {
  it('creates no store for list, preflight, show or reconcile', async () => {
    const list = await runCli(['list', '--json'], env);
    expect(list.code).toBe(EXIT.ok);
    expect(jsonOf(list)).toEqual({ records: [] });
    expect(jsonOf(await runCli(['preflight', '--json'], env))).toMatchObject({ clean: true, records: [] });
    const show = await runCli(['show', REQUEST, '--json'], env);
    expect(show.code).toBe(EXIT.refused);
    expect(jsonOf(show)).toMatchObject({ error: { code: 'not_found' } });
    const reconcile = await runCli(['reconcile', REQUEST, '--reason', 'x', '--json'], env);
    expect(reconcile.code).toBe(EXIT.refused);
    expect(jsonOf(reconcile)).toMatchObject({ error: { code: 'not_found' } });
    expect(existsSync(store)).toBe(false);

    mkdirSync(store, { mode: 0o700 });
    for (const args of [['list'], ['preflight'], ['show', REQUEST], ['reconcile', REQUEST, '--reason', 'x']]) await runCli(args, env);
    expect(readdirSync(store)).toEqual([]);
  });

  it('leaves no lock file behind for a request it does not know', async () => {
    expect((await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST], env)).code).toBe(EXIT.ok);
    const run = await runCli(['reconcile', 'bad', '--reason', 'x', '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'not_found' } });
    expect(readdirSync(join(store, 'locks'))).not.toContain('request-bad.lock');
  });
});

describe('oduflow-master validates the same way everywhere', () => {
  it.each([
    [['show', '../x'], 'invalid_request_id'],
    [['reconcile', '../x', '--reason', 'x'], 'invalid_request_id'],
    [['poll', '--request-id', '../x'], 'invalid_request_id'],
    [['publish-pending', '--request-id', '../x'], 'invalid_request_id'],
    [['list', '--minion', 'bogus'], 'invalid_minion_id'],
  ])('%j names %s (exit 2)', async (args, detail) => {
    const run = await runCli([...args, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'invalid_input', detail } });
    expect(existsSync(store)).toBe(false);
  });

  it('refuses ODUFLOW_LOG_LEVEL=bogus with config_invalid (exit 2)', async () => {
    const run = await runCli(['list', '--json'], { ...env, ODUFLOW_LOG_LEVEL: 'bogus' });
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'config_invalid', detail: 'invalid_log_level' } });
  });

  it.each([[['explode']], [['dispatch', '--minion', MINION]], [['list', '--no-such-option']]])('reports the usage error %j as JSON on stdout with --json (exit 2)', async (args) => {
    const run = await runCli([...args, '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'usage', message: expect.any(String) as unknown } });
  });
});
