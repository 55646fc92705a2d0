import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rolloutRequestId } from '@oduflow/master-runner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../src/exit-codes.js';
import { assertBuilt, cliEnv, jsonOf, runCli } from './support/cli.js';
import { buildCrashCli, removeCrashCli } from './support/crash-entry.js';
import { comparable, reportOf, runIds, targetsOf, writeTargets, type Report } from './support/rollout.js';

/*
 * A real `oduflow-master rollout` process SIGKILLs itself right after each
 * kind of job checkpoint (start, before a stage, after a stage, end) and in
 * the middle of a stage (at the master's own crash points: a record written
 * but not published, a publication whose acknowledgement was not recorded),
 * then the shipped executable resumes it. What must hold, counted at the
 * salt-api stand-in: every target is published to exactly once, and the
 * final report equals an uninterrupted run's but for run ids, request ids
 * derived from them, and timings. The seam is armed only by the test-only
 * entry (support/rollout-cli.ts).
 */

const TARGETS = targetsOf(6);
// One dispatch at a time, so the n-th crash point reached is always the same target's.
const ROLLOUT = (file: string): string[] => ['rollout', '--profile', 'configure', '--targets', file, '--batch', '2', '--concurrency', '1', '--json', '--poll-interval', '20', '--stage-timeout', '5000'];

interface World {
  readonly standIn: SaltApiStandIn;
  readonly dir: string;
  readonly env: Record<string, string>;
  readonly workspace: string;
  readonly file: string;
  close(): Promise<void>;
}

async function world(): Promise<World> {
  const standIn = await startSaltApiStandIn();
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-rollout-crash-'));
  chmodSync(dir, 0o700);
  return {
    standIn,
    dir,
    env: { ...cliEnv(dir, standIn), ODUFLOW_LOG_LEVEL: 'warn' },
    workspace: join(dir, 'rollouts'),
    file: writeTargets(dir, TARGETS),
    close: async () => {
      await standIn.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function expectEveryTargetPublishedOnce(w: World): void {
  const counts = new Map<string, number>();
  for (const p of w.standIn.publications) counts.set(p.minionId, (counts.get(p.minionId) ?? 0) + 1);
  expect([...counts.keys()].sort()).toEqual(TARGETS);
  expect([...counts.values()]).toEqual(TARGETS.map(() => 1));
}

let ENTRY: string;
let uninterrupted: unknown;

beforeAll(async () => {
  assertBuilt();
  ENTRY = await buildCrashCli('rollout-cli');
  const clean = await world();
  try {
    const run = await runCli(ROLLOUT(clean.file), clean.env);
    expect(run.code, run.stderr).toBe(EXIT.ok);
    expectEveryTargetPublishedOnce(clean);
    uninterrupted = comparable(reportOf(run));
  } finally {
    await clean.close();
  }
}, 60_000);
afterAll(() => removeCrashCli(ENTRY));

interface Point {
  readonly name: string;
  readonly directive: string;
  /** Publications the stand-in saw before the kill. */
  readonly publishedBefore: number;
}

const POINTS: readonly Point[] = [
  { name: 'after the start checkpoint', directive: 'kill:start', publishedBefore: 0 },
  { name: 'after the before-stage checkpoint of the second batch', directive: 'kill:before_stage:1', publishedBefore: 2 },
  { name: 'in the second batch, with a record written but not published (P1)', directive: 'kill:P1:3', publishedBefore: 2 },
  { name: 'in the second batch, with a publication whose ack was not recorded (P3)', directive: 'kill:P3:3', publishedBefore: 3 },
  { name: 'after the after-stage checkpoint of the second batch', directive: 'kill:after_stage:1', publishedBefore: 4 },
  { name: 'after the last batch, before the end checkpoint', directive: 'kill:after_stage:2', publishedBefore: 6 },
];

describe('a rollout SIGKILLed and resumed by the shipped executable', () => {
  for (const point of POINTS) {
    it(`${point.name}: publishes to every target once and ends with the uninterrupted report`, async () => {
      const w = await world();
      try {
        const crashed = await runCli([point.directive, ...ROLLOUT(w.file)], w.env, ENTRY);
        expect(crashed.signal, crashed.stdout + crashed.stderr).toBe('SIGKILL');
        expect(w.standIn.publications).toHaveLength(point.publishedBefore);
        const [source] = runIds(w.workspace);
        const shown = jsonOf(await runCli(['rollout', 'show', source as string, '--json'], w.env)) as unknown as Report;
        expect(shown).toMatchObject({ status: 'interrupted', run_id: source, finished_at: null });

        const resumed = await runCli([...ROLLOUT(w.file), '--resume', source as string], w.env);
        expect(resumed.code, resumed.stderr).toBe(EXIT.ok);
        const report = reportOf(resumed);
        expect(report).toMatchObject({ rollout_id: source, resumed_from: source, status: 'succeeded' });
        expect(comparable(report)).toEqual(uninterrupted);
        expectEveryTargetPublishedOnce(w);
        // The requests are the ones fixed before the crash: derived from the rollout, each published once.
        for (const row of report.targets) {
          expect(row.request_id).toBe(rolloutRequestId(source as string, row.minion_id));
          expect(w.standIn.publicationsOf(row.request_id as string)).toBe(1);
        }
        const again = jsonOf(await runCli(['rollout', 'show', source as string, '--json'], w.env));
        expect(again).toMatchObject({ status: 'interrupted', superseded_by: report.run_id });
      } finally {
        await w.close();
      }
    }, 60_000);
  }

  it('after the end checkpoint: the rollout is finished, a resume is refused, and show gives the uninterrupted report', async () => {
    const w = await world();
    try {
      const crashed = await runCli(['kill:end', ...ROLLOUT(w.file)], w.env, ENTRY);
      expect(crashed.signal).toBe('SIGKILL');
      const [source] = runIds(w.workspace);
      const resumed = await runCli([...ROLLOUT(w.file), '--resume', source as string], w.env);
      expect(resumed.code).toBe(EXIT.refused);
      expect(jsonOf(resumed)).toMatchObject({ error: { code: 'rollout_refused', detail: 'run_finished' } });
      const shown = jsonOf(await runCli(['rollout', 'show', source as string, '--json'], w.env)) as unknown as Report;
      expect(comparable(shown)).toEqual(uninterrupted);
      expectEveryTargetPublishedOnce(w);
      expect(runIds(w.workspace)).toEqual([source]);
    } finally {
      await w.close();
    }
  }, 60_000);

  it('twice in a row, resuming the latest run each time; the first run cannot be resumed again', async () => {
    const w = await world();
    try {
      await runCli(['kill:before_stage:1', ...ROLLOUT(w.file)], w.env, ENTRY);
      const [first] = runIds(w.workspace);
      const second = await runCli(['kill:P3:4', ...ROLLOUT(w.file), '--resume', first as string], w.env, ENTRY);
      expect(second.signal).toBe('SIGKILL');
      const secondRun = runIds(w.workspace).find((id) => id !== first) as string;
      const final = await runCli([...ROLLOUT(w.file), '--resume', secondRun], w.env);
      expect(final.code, final.stderr).toBe(EXIT.ok);
      const report = reportOf(final);
      expect(report).toMatchObject({ rollout_id: first, resumed_from: secondRun });
      expect(comparable(report)).toEqual(uninterrupted);
      expectEveryTargetPublishedOnce(w);
      const refused = await runCli([...ROLLOUT(w.file), '--resume', first as string], w.env);
      expect(jsonOf(refused)).toMatchObject({ error: { code: 'rollout_refused', detail: 'run_superseded' } });
    } finally {
      await w.close();
    }
  }, 90_000);

  it('in the second batch, with an intent recorded and nothing sent (P2): never publishes it, halts on it, and goes on once it is reconciled', async () => {
    const w = await world();
    try {
      const crashed = await runCli(['kill:P2:3', ...ROLLOUT(w.file)], w.env, ENTRY);
      expect(crashed.signal).toBe('SIGKILL');
      const [source] = runIds(w.workspace);
      const stuck = TARGETS[2] as string;
      const stuckRequest = rolloutRequestId(source as string, stuck);
      const halted = await runCli([...ROLLOUT(w.file), '--stage-timeout', '300', '--resume', source as string], w.env);
      expect(halted.code).toBe(EXIT.unresolved);
      const report = reportOf(halted);
      expect(report).toMatchObject({ status: 'failed', halted: 'budget_exceeded', counts: { succeeded: 3, unresolved: 1, not_reached: 2 } });
      expect(report.targets[2]).toMatchObject({ minion_id: stuck, outcome: 'unresolved', record_state: 'publishing', request_id: stuckRequest });
      expect(w.standIn.publicationsOf(stuckRequest)).toBe(0);

      const reconciled = await runCli(['reconcile', stuckRequest, '--reason', 'checked: the publication never left', '--actor', 'ops'], w.env);
      expect(reconciled.code, reconciled.stderr).toBe(EXIT.ok);
      const resumed = await runCli([...ROLLOUT(w.file), '--resume', report.run_id], w.env);
      expect(resumed.code, resumed.stderr).toBe(EXIT.ok);
      expect(reportOf(resumed).targets.map((t) => t.outcome)).toEqual(['succeeded', 'succeeded', 'reconciled', 'succeeded', 'succeeded', 'succeeded']);
      expect(w.standIn.publicationsOf(stuckRequest)).toBe(0);
      expect(new Set(w.standIn.publications.map((p) => p.minionId)).size).toBe(5);
      expect(w.standIn.publications).toHaveLength(5);
    } finally {
      await w.close();
    }
  }, 60_000);

  it('refuses a resume with another target list, profile, batch size or mode, before anything runs', async () => {
    const w = await world();
    try {
      await runCli(['kill:before_stage:1', ...ROLLOUT(w.file)], w.env, ENTRY);
      const [source] = runIds(w.workspace);
      const published = w.standIn.publications.length;
      const calls = w.standIn.callCount;
      const fewer = writeTargets(w.dir, TARGETS.slice(1), 'fewer.txt');
      const variants = [
        ['rollout', '--profile', 'configure', '--targets', fewer, '--batch', '2', '--json'],
        ['rollout', '--profile', 'production', '--targets', w.file, '--batch', '2', '--json'],
        ['rollout', '--profile', 'configure', '--targets', w.file, '--batch', '3', '--json'],
        ['rollout', '--profile', 'configure', '--targets', w.file, '--batch', '2', '--max-unresolved', '1', '--json'],
        ['rollout', '--profile', 'configure', '--targets', w.file, '--batch', '2', '--dry-run', '--json'],
      ];
      for (const args of variants) {
        const run = await runCli([...args, '--resume', source as string], w.env);
        expect(run.code).toBe(EXIT.refused);
        expect(jsonOf(run)).toMatchObject({ error: { code: 'rollout_refused', detail: 'resume_mismatch' } });
      }
      expect(runIds(w.workspace)).toEqual([source]);
      expect(w.standIn.publications).toHaveLength(published);
      expect(w.standIn.callCount).toBe(calls);
    } finally {
      await w.close();
    }
  }, 60_000);
});
