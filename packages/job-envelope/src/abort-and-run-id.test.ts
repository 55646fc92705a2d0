import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { STAGE_IDS, codeOf, readJsonFile, recordingStages, runDirs, scratchDir, snapshotTree, spec } from '../tests/support/fixtures.js';
import { readJob } from './read-job.js';
import { type CheckpointEvent, runJob } from './run-job.js';
import type { JobStage } from './stage.js';

let root: string;
let workspace: string;
let remove: () => void;

beforeEach(() => {
  ({ dir: root, remove } = scratchDir());
  workspace = join(root, 'ws');
});
afterEach(() => remove());

const stageFile = (runId: string, index: number): Record<string, unknown> =>
  readJsonFile(join(workspace, 'runs', runId, `stage-${String(index).padStart(5, '0')}.json`));

describe('a new job under a run id the caller chose', () => {
  it('uses that id as its run id and its job id, and a resume keeps it as the job id', async () => {
    const chosen = randomUUID();
    let stop = true;
    const stages: JobStage[] = STAGE_IDS.map((id) => ({
      id,
      run: () => {
        if (id === 'beta' && stop) throw new Error('first attempt fails');
      },
    }));
    const first = await runJob(spec(), stages, { workspace, runId: chosen });
    expect(first).toMatchObject({ run_id: chosen, job_id: chosen, status: 'failed' });
    stop = false;
    const resumed = await runJob(spec(), stages, { workspace, resume: chosen });
    expect(resumed).toMatchObject({ job_id: chosen, resumed_from: chosen, status: 'succeeded' });
    expect(resumed.run_id).not.toBe(chosen);
  });

  it('is refused when a run with that id exists, writing nothing', async () => {
    const chosen = randomUUID();
    await runJob(spec(), recordingStages(), { workspace, runId: chosen });
    const before = snapshotTree(workspace);
    const calls: string[] = [];
    expect(await codeOf(() => runJob(spec(), recordingStages(STAGE_IDS, calls), { workspace, runId: chosen }))).toBe('invalid_argument');
    expect(calls).toEqual([]);
    expect(snapshotTree(workspace)).toEqual(before);
  });

  it('refuses an id that is not a canonical UUID, or one given with resume, before touching the disk', async () => {
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, runId: 'run-1' }))).toBe('invalid_argument');
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, runId: randomUUID(), resume: randomUUID() }))).toBe('invalid_argument');
    expect(existsSync(workspace)).toBe(false);
  });
});

describe('aborting a run (options.signal)', () => {
  it('leaves the stage in progress running, writes nothing after it, and the run reads as interrupted and resumes there', async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    let saw: AbortSignal | undefined;
    const stages: JobStage[] = STAGE_IDS.map((id) => ({
      id,
      run: (ctx) => {
        if (id !== 'beta') return;
        saw = ctx.signal;
        ctx.saveState({ reached: 1 });
        controller.abort();
        // The stage may still save what it has in hand; then it settles (here by returning: not its outcome either).
        ctx.saveState({ reached: 2 });
      },
    }));
    const onCheckpoint = (event: CheckpointEvent): void => void seen.push(event.stage === null ? event.kind : `${event.kind}:${event.stage.id}`);
    const error = await runJob(spec(), stages, { workspace, signal: controller.signal, onCheckpoint }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'aborted' });
    expect(saw?.aborted).toBe(true);
    expect(seen).toEqual(['start', 'before_stage:alpha', 'after_stage:alpha', 'before_stage:beta']);
    const [runId] = runDirs(workspace) as [string];
    expect(stageFile(runId, 1)).toMatchObject({ status: 'running', state: { reached: 2 } });
    expect(existsSync(join(workspace, 'runs', runId, 'stage-00002.json'))).toBe(false);
    expect(readJob(workspace, runId).status).toBe('interrupted');

    const entries: unknown[] = [];
    const again: JobStage[] = STAGE_IDS.map((id) => ({ id, run: (ctx) => void entries.push([id, ctx.entry, ctx.state]) }));
    const resumed = await runJob(spec(), again, { workspace, resume: runId });
    expect(resumed.status).toBe('succeeded');
    expect(entries).toEqual([
      ['beta', 'after_interruption', { reached: 2 }],
      ['gamma', 'first', null],
    ]);
  });

  it('does not record a stage that throws because of the abort as failed', async () => {
    const controller = new AbortController();
    const stages: JobStage[] = [
      {
        id: 'alpha',
        run: (ctx) => {
          controller.abort();
          ctx.signal.throwIfAborted();
        },
      },
    ];
    expect(await codeOf(() => runJob(spec({ stage_ids: ['alpha'] }), stages, { workspace, signal: controller.signal }))).toBe('aborted');
    const [runId] = runDirs(workspace) as [string];
    expect(stageFile(runId, 0)).toMatchObject({ status: 'running', error: null });
    expect(readJob(workspace, runId)).toMatchObject({ status: 'interrupted', report: null });
  });

  it('releases the job lock, so the same process can resume at once', async () => {
    const controller = new AbortController();
    const stages: JobStage[] = [{ id: 'alpha', run: () => controller.abort() }];
    await runJob(spec({ stage_ids: ['alpha'] }), stages, { workspace, signal: controller.signal }).catch(() => undefined);
    const [runId] = runDirs(workspace) as [string];
    const resumed = await runJob(spec({ stage_ids: ['alpha'] }), [{ id: 'alpha', run: () => undefined }], { workspace, resume: runId });
    expect(resumed.status).toBe('succeeded');
  });

  it('refuses to start at all once aborted, creating nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    const calls: string[] = [];
    expect(await codeOf(() => runJob(spec(), recordingStages(STAGE_IDS, calls), { workspace, signal: controller.signal }))).toBe('aborted');
    expect(calls).toEqual([]);
    expect(existsSync(workspace)).toBe(false);
  });

  it('refuses a signal option that is not an AbortSignal', async () => {
    const bogus = { aborted: false } as unknown as AbortSignal;
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, signal: bogus }))).toBe('invalid_argument');
  });
});
