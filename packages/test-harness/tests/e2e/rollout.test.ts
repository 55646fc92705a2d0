/*
 * End-to-end (issue 11): `oduflow-master rollout` — the shipped CLI — on a
 * real local Salt topology of three minions installed the production way.
 * No Salt is mocked: a dry run that touches nothing, a rollout of
 * `configure` in batches of two that applies each minion exactly once (its
 * marker file says how many times the role really ran) and leaves the exact
 * receipt on each, and a rollout of `credentials` (a role with a failing
 * state) halted by its error budget after its first batch, so the third
 * minion never runs it.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findMasterCli } from '../../src/demo.js';
import { ROLE_MARKERS, startTopology, type Topology } from '../../src/topology.js';
import { RAW_OUTPUT_NEEDLES, filesContaining, listFiles, minionEvidence, scenarioTimer, terminalReceipt } from './support/e2e.js';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface Row {
  readonly minion_id: string;
  readonly request_id: string | null;
  readonly outcome: string;
  readonly record_state: string | null;
  readonly passed: number | null;
  readonly total: number | null;
}

interface Report {
  readonly run_id: string;
  readonly status: string;
  readonly halted: string | null;
  readonly counts: Record<string, number>;
  readonly stages: { status: string; error: string | null }[];
  readonly targets: Row[];
}

describe('rollouts on a live Salt topology', () => {
  let topo: Topology;
  let scratch: string;
  let cli: string;
  let targetsFile: string;

  const oduflowMaster = (args: readonly string[]): Promise<Run> =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [cli, ...args], {
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          ODUFLOW_SALT_API_URL: topo.saltApiUrl,
          ODUFLOW_SALT_API_USER: topo.username,
          ODUFLOW_SALT_API_PASSWORD_FILE: topo.passwordFile,
          ODUFLOW_SALT_API_EAUTH: topo.eauth,
          ODUFLOW_CALL_TIMEOUT_MS: '20000',
          ODUFLOW_STORE: join(scratch, 'store'),
          ODUFLOW_LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  const reportOf = (run: Run): Report => {
    try {
      return JSON.parse(run.stdout) as Report;
    } catch {
      throw new Error(`rollout printed no JSON report (exit ${run.code}): ${run.stdout}\n${run.stderr}`);
    }
  };

  const rollout = (profile: string, extra: readonly string[] = []): Promise<Run> =>
    oduflowMaster(['rollout', '--profile', profile, '--targets', targetsFile, '--batch', '2', '--json', '--poll-interval', '500', '--stage-timeout', '90000', ...extra]);

  beforeAll(async () => {
    const found = findMasterCli();
    if (found === null) throw new Error('apps/master/dist/cli.js not found: build first (npx nx run-many -t build)');
    cli = found;
    const t = scenarioTimer('topology R start (3 minions)');
    topo = await startTopology({ minions: 3, startTimeoutMs: 120_000 });
    scratch = mkdtempSync(join(tmpdir(), 'oduflow-e2e-rollout-'));
    chmodSync(scratch, 0o700);
    targetsFile = join(scratch, 'targets.txt');
    writeFileSync(targetsFile, `${[...topo.minionIds].reverse().join('\n')}\n`);
    t('ready');
  }, 240_000);

  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (topo !== undefined) {
      await topo.stop();
      expect(topo.leftoverProcesses()).toEqual([]);
    }
  }, 60_000);

  it('dry-runs without touching any minion: every one would be dispatched, nothing runs and nothing is recorded', async () => {
    const done = scenarioTimer('rollout dry run on 3 minions');
    const run = await rollout('configure', ['--dry-run']);
    expect(run.code, run.stderr).toBe(0);
    const report = reportOf(run);
    expect(report).toMatchObject({ status: 'succeeded', counts: { skipped: 3 } });
    for (const id of topo.minionIds) {
      expect(topo.markerLines(id)).toEqual([]);
      expect(listFiles(join(topo.receiptDir(id), 'requests'))).toEqual([]);
    }
    expect(listFiles(join(scratch, 'store'))).toEqual([]);
    done(`skipped ${report.counts['skipped']}, markers untouched`);
  }, 120_000);

  it('applies configure once on each minion, batch by batch, and leaves each its exact receipt', async () => {
    const done = scenarioTimer('rollout configure on 3 minions (batches of 2)');
    const run = await rollout('configure');
    expect(run.code, run.stderr).toBe(0);
    const report = reportOf(run);
    expect(report).toMatchObject({ status: 'succeeded', halted: null, counts: { succeeded: 3, not_reached: 0 } });
    expect(report.stages.map((s) => s.status)).toEqual(['succeeded', 'succeeded']);
    expect(report.targets.map((t) => t.minion_id)).toEqual([...topo.minionIds].sort());
    for (const row of report.targets) {
      expect(row).toMatchObject({ outcome: 'succeeded', record_state: 'succeeded', passed: 5, total: 5 });
      expect(topo.markerLines(row.minion_id)).toEqual([ROLE_MARKERS.configure]);
      expect(terminalReceipt(topo, row.minion_id, row.request_id as string)).toMatchObject({ request_id: row.request_id, status: 'succeeded', passed: 5, total: 5 });
      expect(Object.keys(minionEvidence(topo, row.minion_id).requests)).toEqual([row.request_id]);
    }
    // Nothing of the states' raw output reached the master's store, the rollout checkpoints or the CLI's output.
    expect(filesContaining([...listFiles(join(scratch, 'store')), ...listFiles(join(scratch, 'rollouts'))], RAW_OUTPUT_NEEDLES)).toEqual([]);
    for (const needle of RAW_OUTPUT_NEEDLES) expect(run.stdout + run.stderr).not.toContain(needle);

    const again = await rollout('configure', ['--resume', report.run_id]);
    expect(again.code).toBe(2);
    expect(JSON.parse(again.stdout)).toMatchObject({ error: { code: 'rollout_refused', detail: 'run_finished' } });
    for (const id of topo.minionIds) expect(topo.markerLines(id)).toEqual([ROLE_MARKERS.configure]);
    done(`succeeded ${report.counts['succeeded']}, one marker line each`);
  }, 240_000);

  it('halts a rollout of a failing role after its first batch, and never runs it on the third minion', async () => {
    const done = scenarioTimer('rollout credentials halted by its budget');
    const run = await rollout('credentials', ['--max-unresolved', '1']);
    expect(run.code, run.stderr).toBe(3);
    const report = reportOf(run);
    expect(report).toMatchObject({ status: 'failed', halted: 'budget_exceeded', counts: { failed: 2, not_reached: 1 } });
    expect(report.stages.map((s) => [s.status, s.error])).toEqual([
      ['failed', 'budget_exceeded'],
      ['pending', null],
    ]);
    const [first, second, third] = [...topo.minionIds].sort() as [string, string, string];
    for (const row of report.targets) expect(row).toMatchObject({ outcome: 'failed', record_state: 'failed', passed: 2, total: 3 });
    expect(report.targets.map((t) => t.minion_id)).toEqual([first, second]);
    expect(topo.markerLines(first)).toEqual([ROLE_MARKERS.configure, ROLE_MARKERS.credentials]);
    expect(topo.markerLines(second)).toEqual([ROLE_MARKERS.configure, ROLE_MARKERS.credentials]);
    expect(topo.markerLines(third)).toEqual([ROLE_MARKERS.configure]);

    const shown = await oduflowMaster(['rollout', 'show', report.run_id, '--json']);
    expect(JSON.parse(shown.stdout)).toEqual(report);
    done(`failed 2, third minion untouched`);
  }, 240_000);
});
