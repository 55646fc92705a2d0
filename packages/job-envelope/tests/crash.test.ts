import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JobReport } from '../src/report.js';
import { readJob } from '../src/read-job.js';
import { runDirs, scratchDir } from './support/fixtures.js';
import type { ChildJob } from './support/job-child.js';
import { reportOf, runChild } from './support/job-process.js';

/*
 * A real SIGKILL of a real runner process at each checkpoint kind and in the
 * middle of a stage, then a resume in another process. What must hold:
 * every target is published exactly once (the marker), every stage that had
 * succeeded before the kill ran exactly once, and the final report equals an
 * uninterrupted run's except for run ids, timestamps and durations.
 */

let root: string;
let remove: () => void;

beforeEach(() => {
  ({ dir: root, remove } = scratchDir('job-envelope-crash-'));
});
afterEach(() => remove());

const TARGETS = ['alpha-t1', 'alpha-t2', 'beta-t1', 'beta-t2', 'gamma-t1', 'gamma-t2'];

function world(name: string): { workspace: string; scratch: string } {
  return { workspace: join(root, name, 'ws'), scratch: join(root, name) };
}

function markerLines(scratch: string): string[] {
  const path = join(scratch, 'marker');
  return existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n') : [];
}

/** A report without what differs between any two runs of the same job. */
function comparable(report: JobReport): unknown {
  return {
    ...report,
    job_id: '*',
    run_id: '*',
    resumed_from: report.resumed_from === null ? null : '*',
    started_at: '*',
    finished_at: '*',
    duration_ms: '*',
    stages: report.stages.map((stage) => ({ ...stage, started_at: '*', finished_at: '*', duration_ms: '*' })),
  };
}

let uninterrupted: unknown;

async function baseline(): Promise<unknown> {
  if (uninterrupted !== undefined) return uninterrupted;
  const clean = world('clean');
  const run = await runChild({ ...clean });
  expect(run.code, run.stderr).toBe(0);
  const lines = markerLines(clean.scratch);
  expect(lines.filter((l) => l.startsWith('publish '))).toHaveLength(TARGETS.length);
  uninterrupted = comparable(reportOf(run));
  return uninterrupted;
}

function expectEachTargetPublishedOnce(lines: readonly string[]): void {
  expect(lines.filter((l) => l.startsWith('second-request ')), lines.join('\n')).toEqual([]);
  for (const target of TARGETS) {
    expect(lines.filter((l) => l.startsWith(`publish ${target} `)), `publishes of ${target}:\n${lines.join('\n')}`).toHaveLength(1);
  }
  for (const stage of ['alpha', 'beta', 'gamma']) expect(lines.filter((l) => l === `done ${stage}`)).toHaveLength(1);
}

interface Point {
  readonly name: string;
  readonly kill: Pick<ChildJob, 'killAt' | 'killMidStage'>;
  /** Stages that finished before the kill: entered exactly once in the whole history. */
  readonly finishedBefore: readonly string[];
  /** Entries of the resumed process, in order. */
  readonly resumedEntries: readonly string[];
}

const POINTS: readonly Point[] = [
  { name: 'after the start checkpoint', kill: { killAt: { kind: 'start' } }, finishedBefore: [], resumedEntries: ['enter alpha first 1', 'enter beta first 1', 'enter gamma first 1'] },
  {
    name: 'after the before-stage checkpoint of the second stage',
    kill: { killAt: { kind: 'before_stage', stageIndex: 1 } },
    finishedBefore: ['alpha'],
    resumedEntries: ['enter beta after_interruption 2', 'enter gamma first 1'],
  },
  {
    name: 'in the middle of the second stage, after its first publish',
    kill: { killMidStage: 'beta' },
    finishedBefore: ['alpha'],
    resumedEntries: ['enter beta after_interruption 2', 'enter gamma first 1'],
  },
  {
    name: 'after the after-stage checkpoint of the second stage',
    kill: { killAt: { kind: 'after_stage', stageIndex: 1 } },
    finishedBefore: ['alpha', 'beta'],
    resumedEntries: ['enter gamma first 1'],
  },
  {
    name: 'after the last stage, before the end checkpoint',
    kill: { killAt: { kind: 'after_stage', stageIndex: 2 } },
    finishedBefore: ['alpha', 'beta', 'gamma'],
    resumedEntries: [],
  },
];

describe('a runner SIGKILLed and resumed by another process', () => {
  for (const point of POINTS) {
    it(`${point.name}: publishes every target once and ends with the uninterrupted report`, async () => {
      const expected = await baseline();
      const { workspace, scratch } = world('crashed');
      const crashed = await runChild({ workspace, scratch, ...point.kill });
      expect(crashed.signal, crashed.stderr).toBe('SIGKILL');
      const [source] = runDirs(workspace);
      expect(source).toBeDefined();
      expect(readJob(workspace, source as string).status).toBe('interrupted');
      const before = markerLines(scratch);
      for (const stage of point.finishedBefore) expect(before).toContain(`done ${stage}`);

      const resumed = await runChild({ workspace, scratch, resume: source as string });
      expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
      const lines = markerLines(scratch);
      expect(lines.slice(before.length).filter((l) => l.startsWith('enter '))).toEqual(point.resumedEntries);
      for (const stage of point.finishedBefore) expect(lines.filter((l) => l.startsWith(`enter ${stage} `))).toHaveLength(1);
      expectEachTargetPublishedOnce(lines);
      const report = reportOf(resumed);
      expect(report.resumed_from).toBe(source);
      expect(report.job_id).toBe(source);
      expect(comparable(report)).toEqual({ ...(expected as object), resumed_from: '*' });
      expect(readJob(workspace, source as string)).toMatchObject({ status: 'interrupted', supersededBy: report.run_id });
    });
  }

  it('after the end checkpoint: the run is finished, a resume is refused, and its report is the uninterrupted one', async () => {
    const expected = await baseline();
    const { workspace, scratch } = world('ended');
    const crashed = await runChild({ workspace, scratch, killAt: { kind: 'end' } });
    expect(crashed.signal).toBe('SIGKILL');
    const [source] = runDirs(workspace);
    const resumed = await runChild({ workspace, scratch, resume: source as string });
    expect(resumed.stdout).toContain('ERROR run_finished');
    expectEachTargetPublishedOnce(markerLines(scratch));
    const shown = await runChild({ workspace, scratch, show: source as string });
    expect(comparable(reportOf(shown))).toEqual(expected);
    expect(readdirSync(join(workspace, 'runs'))).toEqual([source]);
  });

  it('twice in a row (before a stage, then in the middle of the next) and resumed from the latest run each time', async () => {
    const expected = await baseline();
    const { workspace, scratch } = world('twice');
    await runChild({ workspace, scratch, killAt: { kind: 'before_stage', stageIndex: 1 } });
    const [first] = runDirs(workspace);
    const second = await runChild({ workspace, scratch, resume: first as string, killMidStage: 'gamma' });
    expect(second.signal).toBe('SIGKILL');
    const secondRun = (second.stdout.split('\n').find((l) => l.startsWith('RUN ')) ?? '').slice('RUN '.length);
    expect(runDirs(workspace)).toContain(secondRun);
    const final = await runChild({ workspace, scratch, resume: secondRun });
    expect(final.code, final.stdout + final.stderr).toBe(0);
    expectEachTargetPublishedOnce(markerLines(scratch));
    const report = reportOf(final);
    expect(report.job_id).toBe(first);
    expect(report.resumed_from).toBe(secondRun);
    expect(comparable(report)).toEqual({ ...(expected as object), resumed_from: '*' });
    const refused = await runChild({ workspace, scratch, resume: first as string });
    expect(refused.stdout).toContain('ERROR run_superseded');
  });
});
