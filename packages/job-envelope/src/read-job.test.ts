import { randomUUID } from 'node:crypto';
import { mkdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codeOf, readJsonFile, recordingStages, scratchDir, snapshotTree, spec } from '../tests/support/fixtures.js';
import { interruptAt } from '../tests/support/interrupt.js';
import { listJobs, readJob } from './read-job.js';
import { runJob } from './run-job.js';

let workspace: string;
let remove: () => void;

beforeEach(() => {
  const scratch = scratchDir();
  workspace = join(scratch.dir, 'ws');
  remove = scratch.remove;
});
afterEach(() => remove());

const runFile = (runId: string, name: string): string => join(workspace, 'runs', runId, name);

describe('readJob', () => {
  it('returns a finished run with its ledger, its stage states and its report, writing nothing', async () => {
    const stages = ['alpha', 'beta', 'gamma'].map((id) => ({ id, run: (ctx: { saveState: (v: unknown) => void }) => ctx.saveState({ id }) }));
    const report = await runJob(spec(), stages as never, { workspace });
    const before = snapshotTree(workspace);
    const view = readJob(workspace, report.run_id);
    expect(view.status).toBe('succeeded');
    expect(view.report).toEqual(report);
    expect(view.supersededBy).toBeNull();
    expect(view.stages.map((s) => [s.stage_id, s.status, s.state])).toEqual([
      ['alpha', 'succeeded', { id: 'alpha' }],
      ['beta', 'succeeded', { id: 'beta' }],
      ['gamma', 'succeeded', { id: 'gamma' }],
    ]);
    expect(view.run).toMatchObject({ run_id: report.run_id, job_type: 'rollout', status: 'succeeded' });
    expect(snapshotTree(workspace)).toEqual(before);
  });

  it('tells a run whose runner is alive (running) from one whose runner is gone (interrupted)', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((done) => (release = done));
    let runId = '';
    let entered: () => void = () => undefined;
    const inside = new Promise<void>((done) => (entered = done));
    const live = runJob(spec({ stage_ids: ['alpha'] }), [{ id: 'alpha', run: async (ctx) => { runId = ctx.runId; entered(); await gate; } }], { workspace });
    await inside;
    const running = readJob(workspace, runId);
    expect(running.status).toBe('running');
    expect(running.stages[0]?.status).toBe('running');
    expect(running.report).toBeNull();
    release();
    await live;
    expect(readJob(workspace, runId).status).toBe('succeeded');

    const interrupted = await interruptAt(spec(), recordingStages(), { workspace }, 'before_stage', 1);
    expect(readJob(workspace, interrupted).status).toBe('interrupted');
  });

  it('names the run that took an interrupted run over', async () => {
    const source = await interruptAt(spec(), recordingStages(), { workspace }, 'after_stage', 0);
    const successor = await runJob(spec(), recordingStages(), { workspace, resume: source });
    expect(readJob(workspace, source).supersededBy).toBe(successor.run_id);
  });

  it('refuses a report that does not belong to its ledger, and a finished run without one', async () => {
    const report = await runJob(spec(), recordingStages(), { workspace });
    writeFileSync(runFile(report.run_id, 'report.json'), JSON.stringify({ ...report, status: 'failed' }));
    expect(await codeOf(() => readJob(workspace, report.run_id))).toBe('corrupt_checkpoint');
    unlinkSync(runFile(report.run_id, 'report.json'));
    expect(await codeOf(() => readJob(workspace, report.run_id))).toBe('corrupt_checkpoint');
  });

  it('proves the ledger consistent like a resume does', async () => {
    const report = await runJob(spec(), recordingStages(), { workspace });
    const header = readJsonFile(runFile(report.run_id, 'job.json'));
    writeFileSync(runFile(report.run_id, 'job.json'), JSON.stringify({ ...header, dry_run: true }));
    expect(await codeOf(() => readJob(workspace, report.run_id))).toBe('corrupt_checkpoint');
  });

  it('refuses a malformed run id and answers run_not_found for an unknown one', async () => {
    await runJob(spec(), recordingStages(), { workspace });
    expect(await codeOf(() => readJob(workspace, '../etc'))).toBe('invalid_argument');
    expect(await codeOf(() => readJob('relative', randomUUID()))).toBe('invalid_argument');
    expect(await codeOf(() => readJob(workspace, randomUUID()))).toBe('run_not_found');
    expect(await codeOf(() => readJob(join(workspace, 'missing'), randomUUID()))).toBe('run_not_found');
  });
});

describe('listJobs', () => {
  it('lists every run oldest first with its lineage, and a broken one with its code instead of hiding the others', async () => {
    let ms = Date.parse('2026-11-29T10:00:00.000Z');
    const clock = (): Date => new Date((ms += 1000)); // distinct creation times: the order is by them
    const source = await interruptAt(spec(), recordingStages(), { workspace, clock }, 'after_stage', 0);
    const resumed = await runJob(spec(), recordingStages(), { workspace, resume: source, clock });
    const other = await runJob(spec({ job_type: 'migrate-store' }), recordingStages(), { workspace, clock });
    const broken = await runJob(spec(), recordingStages(), { workspace, clock });
    writeFileSync(runFile(broken.run_id, 'stage-00000.json'), '{');
    mkdirSync(join(workspace, 'runs', randomUUID()), { mode: 0o700 }); // an allocation whose header never landed
    mkdirSync(join(workspace, 'runs', 'lost+found'), { mode: 0o700 });

    const listing = listJobs(workspace);
    expect(listing.map((l) => [l.runId, l.valid])).toEqual([
      [source, true],
      [resumed.run_id, true],
      [other.run_id, true],
      [broken.run_id, false],
    ]);
    expect(listing[0]).toMatchObject({ status: 'interrupted', supersededBy: resumed.run_id, stages: { succeeded: 1, running: 0, pending: 2, failed: 0 } });
    expect(listing[1]).toMatchObject({ status: 'succeeded', resumedFrom: source, jobId: source });
    expect(listing[3]).toEqual({ runId: broken.run_id, valid: false, code: 'corrupt_checkpoint' });
    expect(listJobs(workspace, { jobType: 'migrate-store' }).map((l) => l.runId)).toEqual([other.run_id, broken.run_id]);
    expect(await codeOf(() => listJobs(workspace, { jobType: '../x' }))).toBe('invalid_argument');
  });
});
