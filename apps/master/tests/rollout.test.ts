import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT, EXIT_FOR_ROLLOUT_OUTCOME } from '../src/exit-codes.js';
import { CLI, assertBuilt, cliEnv, jsonOf, runCli } from './support/cli.js';
import { buildCrashCli, removeCrashCli } from './support/crash-entry.js';
import { HOSTILE_PATH, HOSTILE_SECRET } from './support/hostile.js';
import { reportOf, runOnTerminal, runWithInput, targetsOf, writeTargets } from './support/rollout.js';

/*
 * `oduflow-master rollout`, the real executable in a real process, against
 * the salt-api stand-in (which counts every publication per minion) and a
 * private file store; the workspace is `rollouts/` beside the store.
 */

let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;
let workspace: string;
let TEST_CLI: string;

beforeAll(async () => {
  assertBuilt();
  TEST_CLI = await buildCrashCli('rollout-cli');
}, 60_000);
afterAll(() => removeCrashCli(TEST_CLI));
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-rollout-cli-'));
  chmodSync(dir, 0o700);
  env = { ...cliEnv(dir, standIn), ODUFLOW_LOG_LEVEL: 'warn' };
  workspace = join(dir, 'rollouts');
});
afterEach(async () => {
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

const FAST = ['--poll-interval', '20', '--stage-timeout', '5000'];

function publicationsPerMinion(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const p of standIn.publications) counts.set(p.minionId, (counts.get(p.minionId) ?? 0) + 1);
  return counts;
}

describe('oduflow-master rollout', () => {
  it('runs from a targets file with JSON progress lines on stderr and the JSON report on stdout; show and list read it back', async () => {
    const targets = targetsOf(5);
    const file = writeTargets(dir, [...targets, targets[0] as string].reverse());
    const run = await runCli(['rollout', '--profile', 'configure', '--targets', file, '--batch', '2', '--json', ...FAST], env);
    expect(run.code, run.stderr).toBe(EXIT.ok);
    const report = reportOf(run);
    expect(report).toMatchObject({ status: 'succeeded', halted: null, profile: 'configure', target_count: 5, batch_size: 2, max_unresolved: 0 });
    expect(report.counts).toMatchObject({ succeeded: 5, not_reached: 0 });
    expect(report.targets.map((t) => [t.minion_id, t.outcome])).toEqual(targets.map((t) => [t, 'succeeded']));
    expect([...publicationsPerMinion().values()]).toEqual([1, 1, 1, 1, 1]);

    const progress = run.stderr.split('\n').filter((l) => l.startsWith('{"progress"')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(progress.map((p) => p['progress'])).toEqual([
      'rollout_started',
      ...['1', '2'].flatMap(() => ['rollout_stage_started', 'rollout_target', 'rollout_target', 'rollout_stage_finished']),
      'rollout_stage_started',
      'rollout_target',
      'rollout_stage_finished',
      'rollout_finished',
    ]);
    expect(progress[0]).toMatchObject({ run_id: report.run_id, rollout_id: report.rollout_id, targets: 5, stages: 3, dry_run: false });

    const shown = await runCli(['rollout', 'show', report.run_id, '--json'], env);
    expect(shown.code).toBe(EXIT.ok);
    expect(jsonOf(shown)).toEqual(report);
    const table = await runCli(['rollout', 'show', report.run_id], env);
    expect(table.stdout).toContain('rollout: succeeded');
    for (const target of targets) expect(table.stdout).toContain(target);
    const listed = jsonOf(await runCli(['rollout', 'list', '--json'], env));
    expect(listed).toMatchObject({ rollouts: [{ run_id: report.run_id, rollout_id: report.rollout_id, status: 'succeeded', valid: true, stages: 3, stages_succeeded: 3 }] });
  });

  it('prints plain progress lines on stderr when it is not a terminal, and the final table on stdout', async () => {
    const targets = targetsOf(3);
    const run = await runCli(['rollout', '--profile', 'configure', '--targets', writeTargets(dir, targets), '--batch', '2', ...FAST], env);
    expect(run.code, run.stderr).toBe(EXIT.ok);
    const lines = run.stderr.split('\n').filter((l) => l.startsWith('rollout:'));
    expect(lines[0]).toMatch(/^rollout: started run [0-9a-f-]{36} \(rollout [0-9a-f-]{36}\): 3 target\(s\) in 2 batch\(es\)$/);
    expect(lines).toContain(`rollout: [3/3] ${targets[2]} succeeded`);
    expect(lines.at(-1)).toBe('rollout: succeeded');
    expect(run.stdout).toContain('rollout: succeeded');
    expect(run.stdout).toContain('succeeded 3');
    expect(run.stdout).not.toContain('\u001b['); // no terminal control sequences off a terminal
  });

  it('draws a live progress bar on a terminal', async () => {
    const file = writeTargets(dir, targetsOf(4));
    const command = [process.execPath, CLI, 'rollout', '--profile', 'configure', '--targets', file, '--batch', '2', ...FAST].join(' ');
    const run = await runOnTerminal(command, env);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/rollout \|[█░]{30}\| 4\/4 targets \| succeeded \| succeeded 4/);
    expect(run.stdout).toContain('rollout: succeeded');
    expect(publicationsPerMinion().size).toBe(4);
  });

  it('reads its targets from standard input with --targets -', async () => {
    const targets = targetsOf(2);
    const run = await runWithInput(CLI, ['rollout', '--profile', 'configure', '--targets', '-', '--json', ...FAST], env, `${targets.join('\n')}\n`);
    expect(run.code, run.stderr).toBe(EXIT.ok);
    expect(reportOf(run).targets.map((t) => t.minion_id)).toEqual(targets);
  });

  it('dispatches nothing in a dry run, creates no record store, and says what a real run would meet', async () => {
    const [notReady, free] = targetsOf(2) as [string, string];
    standIn.capabilities = (id) => ({ retcode: 0, ret: { protocol: 1, module_version: '1.1.0', salt_version: '3006.27', module_sha256: 'c0ffee00'.repeat(8), ready: id !== notReady, reasons: id === notReady ? ['multiprocessing'] : [] } });
    const run = await runCli(['rollout', '--profile', 'configure', '--targets', writeTargets(dir, [notReady, free]), '--dry-run', '--json', ...FAST], env);
    expect(run.code, run.stderr).toBe(EXIT.refused);
    expect(reportOf(run)).toMatchObject({ dry_run: true, status: 'succeeded', counts: { rejected: 1, skipped: 1 } });
    expect(standIn.publications).toEqual([]);
    expect(existsSync(join(dir, 'store'))).toBe(false);
  });

  it('exits 3 when the budget halts it, and the halted rollout says so', async () => {
    const targets = targetsOf(4);
    standIn.result = { status: 'failed', passed: 2, total: 3 };
    const run = await runCli(['rollout', '--profile', 'configure', '--targets', writeTargets(dir, targets), '--batch', '2', '--max-unresolved', '1', '--json', ...FAST], env);
    expect(run.code).toBe(EXIT.unresolved);
    expect(reportOf(run)).toMatchObject({ status: 'failed', halted: 'budget_exceeded', budget_used: 2, counts: { failed: 2, not_reached: 2 } });
    expect(publicationsPerMinion().size).toBe(2);
  });

  it.each([
    [['rollout', '--targets', '/dev/null'], 'rollout needs --profile'],
    [['rollout', '--profile', 'configure'], 'rollout needs --targets'],
    [['rollout', 'show'], 'rollout show needs a run id'],
    [['rollout', 'show', 'not-a-uuid'], 'rollout show needs a run id'],
    [['rollout', 'list', '--profile', 'configure'], 'rollout list takes only --workspace'],
    [['rollout', 'restart'], 'rollout takes show <run-id>, list'],
    [['rollout', '--profile', 'configure', '--targets', '-', '--batch', 'ten'], '--batch must be a whole number'],
  ])('refuses %j with exit 2 before reading anything', async (args, message) => {
    const run = await runCli(args, env);
    expect(run.code).toBe(EXIT.refused);
    expect(run.stderr).toContain(message);
    expect(existsSync(workspace)).toBe(false);
    expect(standIn.callCount).toBe(0);
  });

  it('names a bad line of the targets file by its number, never by its content', async () => {
    const file = writeTargets(dir, [targetsOf(1)[0] as string, 'client-oops password=hunter2']);
    const run = await runCli(['rollout', '--profile', 'configure', '--targets', file], env);
    expect(run.code).toBe(EXIT.refused);
    expect(run.stderr).toContain('line 3 of the targets file');
    expect(run.stderr + run.stdout).not.toContain('hunter2');
  });

  it('refuses to show a rollout that does not exist, and lists none in a workspace that does not exist', async () => {
    const shown = await runCli(['rollout', 'show', '0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0b', '--json'], env);
    expect(shown.code).toBe(EXIT.refused);
    expect(jsonOf(shown)).toMatchObject({ error: { code: 'rollout_refused', detail: 'run_not_found' } });
    expect(jsonOf(await runCli(['rollout', 'list', '--json'], env))).toEqual({ rollouts: [] });
    expect(existsSync(workspace)).toBe(false);
  });
});

describe('a rollout stage whose dispatch throws a hostile exception', () => {
  it('fails the stage with the fixed code; neither its output, its log nor its checkpoints hold the message, the secret or the path', async () => {
    const file = writeTargets(dir, targetsOf(3));
    const args = ['rollout', '--profile', 'configure', '--targets', file, '--batch', '2', ...FAST];
    const run = await runCli(['throw:P2', ...args, '--log-level', 'debug'], env, TEST_CLI);
    expect(run.code, run.stderr).toBe(EXIT.internal);
    expect(run.stdout).toContain('rollout: halted (stage_exception)');
    const json = await runCli(['throw:P2', ...args, '--json'], env, TEST_CLI);
    expect(reportOf(json)).toMatchObject({ status: 'failed', halted: 'stage_exception', stages: [{ status: 'failed', error: 'stage_exception' }, { status: 'pending' }] });
    const [first] = readdirSync(join(workspace, 'runs'));
    const shown = await runCli(['rollout', 'show', first as string], env);
    const checkpoints = readdirSync(join(workspace, 'runs')).flatMap((run) =>
      readdirSync(join(workspace, 'runs', run)).filter((n) => n.endsWith('.json')).map((n) => readFileSync(join(workspace, 'runs', run, n), 'utf8')),
    );
    for (const text of [run.stdout, run.stderr, json.stdout, json.stderr, shown.stdout, shown.stderr, ...checkpoints]) {
      expect(text).not.toContain(HOSTILE_SECRET);
      expect(text).not.toContain(HOSTILE_PATH);
      expect(text).not.toContain('connect failed');
    }
    expect(run.stderr).toContain('"err_type":"Error"');
    expect(standIn.publications).toEqual([]);
  });
});

describe('the rollout exit table', () => {
  it('gives every outcome an exit status, and 0 only to outcomes that leave nothing to do', () => {
    const ok = Object.entries(EXIT_FOR_ROLLOUT_OUTCOME).filter(([, code]) => code === EXIT.ok).map(([outcome]) => outcome);
    expect(ok.sort()).toEqual(['reconciled', 'skipped', 'succeeded']);
  });
});
