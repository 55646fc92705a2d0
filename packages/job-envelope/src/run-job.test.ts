import { existsSync, readFileSync, statSync, writeFileSync, mkdirSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { STAGE_IDS, codeOf, readJsonFile, recordingStages, runDirs, scratchDir, snapshotTree, spec } from '../tests/support/fixtures.js';
import { interruptAt } from '../tests/support/interrupt.js';
import { INTERNAL_STAGE_ERROR } from './ledger.js';
import { JobSummarySchema } from './report.js';
import { MAX_STAGE_STATE_BYTES } from './limits.js';
import { type CheckpointEvent, runJob } from './run-job.js';
import type { JobStage, StageContext } from './stage.js';

let root: string;
let workspace: string;
let remove: () => void;

beforeEach(() => {
  ({ dir: root, remove } = scratchDir());
  workspace = join(root, 'ws');
});
afterEach(() => remove());

const runFile = (runId: string, name: string): string => join(workspace, 'runs', runId, name);
const stageFile = (runId: string, index: number): Record<string, unknown> =>
  readJsonFile(runFile(runId, `stage-${String(index).padStart(5, '0')}.json`));

describe('runJob on a new job', () => {
  it('runs every stage once, in order, and returns a succeeded report with per-stage timings', async () => {
    const calls: string[] = [];
    const report = await runJob(spec(), recordingStages(STAGE_IDS, calls), { workspace });
    expect(calls).toEqual(['alpha', 'beta', 'gamma']);
    expect(report).toMatchObject({ schema_version: 1, job_type: 'rollout', dry_run: false, status: 'succeeded', resumed_from: null, summary: null });
    expect(report.job_id).toBe(report.run_id);
    expect(report.stages.map((s) => [s.stage_id, s.status, s.error])).toEqual([
      ['alpha', 'succeeded', null],
      ['beta', 'succeeded', null],
      ['gamma', 'succeeded', null],
    ]);
    for (const stage of report.stages) expect(stage.duration_ms).toBe(Date.parse(stage.finished_at ?? '') - Date.parse(stage.started_at ?? ''));
    expect(readJsonFile(runFile(report.run_id, 'report.json'))).toEqual(report);
    expect(readJsonFile(runFile(report.run_id, 'job.json'))).toMatchObject({ status: 'succeeded', finished_at: report.finished_at });
  });

  it('keeps every directory 0700 and every file 0600', async () => {
    const report = await runJob(spec(), recordingStages(), { workspace });
    const tree = snapshotTree(workspace);
    expect(Object.keys(tree)).toEqual(
      expect.arrayContaining(['locks', 'locks/rollout.lock', 'runs', `runs/${report.run_id}`, `runs/${report.run_id}/job.json`]),
    );
    for (const [name, entry] of Object.entries(tree)) {
      expect(entry.startsWith('dir 700') || entry.startsWith('file 600'), name).toBe(true);
    }
    expect(statSync(workspace).mode & 0o7777).toBe(0o700);
  });

  it('makes each checkpoint durable before reporting it: start, before and after every stage, end', async () => {
    const seen: string[] = [];
    const onCheckpoint = (event: CheckpointEvent): void => {
      const { kind, runId, stage } = event;
      if (kind === 'start') {
        expect(readJsonFile(runFile(runId, 'job.json'))).toMatchObject({ status: 'running', finished_at: null });
        expect(existsSync(runFile(runId, 'stage-00000.json'))).toBe(false);
      } else if (kind === 'end') {
        expect(readJsonFile(runFile(runId, 'job.json'))).toMatchObject({ status: 'succeeded' });
        expect(readJsonFile(runFile(runId, 'report.json'))).toMatchObject({ status: 'succeeded' });
      } else {
        expect(stageFile(runId, stage?.index ?? -1)).toMatchObject({ stage_id: stage?.id, status: stage?.status });
      }
      seen.push(stage === null ? kind : `${kind}:${stage.id}:${stage.status}`);
    };
    await runJob(spec(), recordingStages(), { workspace, onCheckpoint });
    expect(seen).toEqual([
      'start',
      'before_stage:alpha:running',
      'after_stage:alpha:succeeded',
      'before_stage:beta:running',
      'after_stage:beta:succeeded',
      'before_stage:gamma:running',
      'after_stage:gamma:succeeded',
      'end',
    ]);
  });

  it('hands every stage the dry-run flag, the job and run ids, its position and a first entry', async () => {
    const contexts: Omit<StageContext, 'saveState' | 'fail' | 'scratch'>[] = [];
    const stages: JobStage[] = STAGE_IDS.map((id) => ({
      id,
      run: (ctx) => {
        contexts.push({ ...ctx, state: ctx.state });
      },
    }));
    const report = await runJob(spec({ dry_run: true }), stages, { workspace });
    expect(report.dry_run).toBe(true);
    expect(contexts.map((c) => [c.stageId, c.stageIndex, c.dryRun, c.entry, c.attempt, c.state, c.jobId, c.runId])).toEqual(
      STAGE_IDS.map((id, index) => [id, index, true, 'first', 1, null, report.job_id, report.run_id]),
    );
    expect(contexts[0]?.runDir).toBe(join(workspace, 'runs', report.run_id));
  });

  it('refuses stages that do not match the spec, and bad options, before touching the disk', async () => {
    expect(await codeOf(() => runJob(spec(), recordingStages(['alpha', 'gamma', 'beta']), { workspace }))).toBe('invalid_spec');
    expect(await codeOf(() => runJob(spec(), recordingStages(['alpha', 'beta']), { workspace }))).toBe('invalid_spec');
    const badCode: JobStage = { id: 'alpha', failureCodes: ['Not A Code'], run: () => undefined };
    expect(await codeOf(() => runJob(spec({ stage_ids: ['alpha'] }), [badCode], { workspace }))).toBe('invalid_spec');
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace: 'relative/ws' }))).toBe('invalid_argument');
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: 'not-a-run-id' }))).toBe('invalid_argument');
    expect(existsSync(workspace)).toBe(false);
  });
});

describe('stage failures', () => {
  const SECRET = 'hunter2-credential';

  class SecretNamedError extends Error {
    constructor() {
      super(`connection to db failed: password=${SECRET} at /root/.ssh/id_rsa`);
      this.name = `TypeError ${SECRET}`;
    }
  }

  const hostileValues: [string, () => unknown][] = [
    ['an Error with a secret name and message', () => new SecretNamedError()],
    ['a string', () => `raw ${SECRET}`],
    ['an object whose every property access throws', () => new Proxy({}, { get: () => { throw new Error(SECRET); }, getPrototypeOf: () => { throw new Error(SECRET); } })],
    ['an object pretending to be a declared failure', () => ({ failureCode: 'budget_exceeded', message: SECRET })],
  ];

  it.each(hostileValues)('retains a terminal failed report holding only the fixed tuple when a stage throws %s', async (_what, hostile) => {
    const calls: string[] = [];
    const stages: JobStage[] = [
      { id: 'alpha', run: (ctx) => ctx.saveState({ target: 'client-a' }) },
      { id: 'beta', failureCodes: ['budget_exceeded'], run: () => { throw hostile(); } },
      { id: 'gamma', run: () => void calls.push('gamma') },
    ];
    const report = await runJob(spec(), stages, { workspace });
    expect(report.status).toBe('failed');
    expect(report.stages.map((s) => s.status)).toEqual(['succeeded', 'failed', 'pending']);
    expect(report.stages[1]?.error).toEqual(INTERNAL_STAGE_ERROR);
    expect(calls).toEqual([]);
    expect(readJsonFile(runFile(report.run_id, 'report.json'))).toEqual(report);
    const everything = JSON.stringify(snapshotTree(workspace));
    expect(everything).not.toContain(SECRET);
    expect(everything).not.toContain('TypeError');
    expect(everything).not.toContain('SecretNamedError');
    expect(everything).not.toContain('.ssh');
    expect(JSON.stringify(report)).not.toContain('client-a'); // stage state never reaches a report
  });

  it('records a declared failure code with the fixed message and stops the job there', async () => {
    const stages: JobStage<'budget_exceeded'>[] = [
      { id: 'alpha', failureCodes: ['budget_exceeded'], run: (ctx) => ctx.fail('budget_exceeded') },
      { id: 'beta', run: () => undefined },
    ];
    const report = await runJob(spec({ stage_ids: ['alpha', 'beta'] }), stages, { workspace });
    expect(report.stages[0]?.error).toEqual({ category: 'stage', code: 'budget_exceeded', message: 'stage reported failure' });
    expect(report.stages[1]?.status).toBe('pending');
  });

  it('records a failure code the stage did not declare as the internal tuple', async () => {
    const stage: JobStage = { id: 'alpha', failureCodes: ['budget_exceeded'], run: (ctx) => ctx.fail('other_code') };
    const report = await runJob(spec({ stage_ids: ['alpha'] }), [stage], { workspace });
    expect(report.stages[0]?.error).toEqual(INTERNAL_STAGE_ERROR);
  });
});

describe('stage state', () => {
  it('is written durably before saveState returns, and handed back as a detached copy', async () => {
    const stage: JobStage = {
      id: 'alpha',
      run: (ctx) => {
        ctx.saveState({ requests: ['r-1', 'r-2'] });
        expect(stageFile(ctx.runId, 0)).toMatchObject({ status: 'running', state: { requests: ['r-1', 'r-2'] } });
        const copy = ctx.state as { requests: string[] };
        copy.requests.push('changed');
        expect(ctx.state).toEqual({ requests: ['r-1', 'r-2'] });
      },
    };
    const report = await runJob(spec({ stage_ids: ['alpha'] }), [stage], { workspace });
    expect(stageFile(report.run_id, 0)).toMatchObject({ status: 'succeeded', state: { requests: ['r-1', 'r-2'] } });
  });

  it('is the value as it was saved, in canonical text, whatever the stage does to its own value afterwards', async () => {
    const seen: unknown[] = [];
    const stages: JobStage[] = [
      {
        id: 'alpha',
        run: (ctx) => {
          const value = { zeta: [1, 2], alpha: { '10': 'ten', '2': 'two' } };
          ctx.saveState(value);
          value.zeta.push(3);
          value.alpha['2'] = 'changed';
          seen.push(ctx.state);
        },
      },
      {
        id: 'beta',
        run: (ctx) => {
          const earlier = ctx.earlierState('alpha') as { zeta: number[] };
          earlier.zeta.push(4);
          seen.push(ctx.earlierState('alpha'));
        },
      },
    ];
    const report = await runJob(spec({ stage_ids: ['alpha', 'beta'] }), stages, { workspace });
    const saved = { zeta: [1, 2], alpha: { '10': 'ten', '2': 'two' } };
    expect(seen).toEqual([saved, saved]);
    const text = readFileSync(runFile(report.run_id, 'stage-00000.json'), 'utf8');
    expect(text.endsWith(',"state":{"alpha":{"10":"ten","2":"two"},"zeta":[1,2]}}')).toBe(true);
    expect(JSON.parse(text)).toMatchObject({ status: 'succeeded', stage_id: 'alpha', state: saved });
  });

  it('refuses a state outside canonical JSON or over the size limit and keeps the last saved one', async () => {
    const codes: string[] = [];
    const stage: JobStage = {
      id: 'alpha',
      run: async (ctx) => {
        ctx.saveState({ kept: true });
        codes.push(await codeOf(() => ctx.saveState({ ratio: 0.5 })));
        codes.push(await codeOf(() => ctx.saveState({ when: new Date() } as never)));
        codes.push(await codeOf(() => ctx.saveState('x'.repeat(MAX_STAGE_STATE_BYTES))));
      },
    };
    const report = await runJob(spec({ stage_ids: ['alpha'] }), [stage], { workspace });
    expect(codes).toEqual(['invalid_stage_state', 'invalid_stage_state', 'invalid_stage_state']);
    expect(report.status).toBe('succeeded');
    expect(stageFile(report.run_id, 0)['state']).toEqual({ kept: true });
  });

  it('cannot be saved once the stage has finished', async () => {
    let late: StageContext | undefined;
    const stage: JobStage = { id: 'alpha', run: (ctx) => void (late = ctx) };
    const report = await runJob(spec({ stage_ids: ['alpha'] }), [stage], { workspace });
    expect(await codeOf(() => late?.saveState({ late: true }))).toBe('invalid_stage_state');
    expect(stageFile(report.run_id, 0)['state']).toBeNull();
  });

  it('gives a stage a private scratch directory inside its run', async () => {
    const stage: JobStage = {
      id: 'alpha',
      run: (ctx) => {
        const scratch = ctx.scratch();
        scratch.writeJsonAtomic('notes.json', { n: 1 });
        scratch.close();
      },
    };
    const report = await runJob(spec({ stage_ids: ['alpha'] }), [stage], { workspace });
    expect(statSync(runFile(report.run_id, 'scratch')).mode & 0o7777).toBe(0o700);
    expect(readJsonFile(join(runFile(report.run_id, 'scratch'), 'notes.json'))).toEqual({ n: 1 });
  });
});

describe('the summary hook', () => {
  const stages: JobStage[] = ['alpha', 'beta'].map((id) => ({ id, run: (ctx) => ctx.saveState({ targets: { [`client-${id}`]: 'succeeded' } }) }));

  it('builds the report summary from the final stage states', async () => {
    const report = await runJob(spec({ stage_ids: ['alpha', 'beta'] }), stages, {
      workspace,
      summarize: ({ stages: done, status, dryRun }) => {
        expect([status, dryRun]).toEqual(['succeeded', false]);
        const items = done.flatMap((s) => Object.entries((s.state as { targets: Record<string, string> }).targets).map(([id, state]) => ({ id, state })));
        return { counts: { succeeded: items.length }, items };
      },
    });
    expect(report.summary).toEqual({
      counts: { succeeded: 2 },
      items: [
        { id: 'client-alpha', state: 'succeeded' },
        { id: 'client-beta', state: 'succeeded' },
      ],
    });
  });

  it('puts a copy of the summary in the report, equal to what its schema accepts', async () => {
    const summary = { counts: { succeeded: 2, failed: 0 }, items: [{ id: 'client-a', state: 'succeeded' }, { id: 'client-b', state: 'succeeded' }] };
    const report = await runJob(spec({ stage_ids: ['alpha', 'beta'] }), stages, { workspace, summarize: () => summary });
    expect(report.summary).toEqual(JobSummarySchema.parse(summary));
    summary.items.push({ id: 'client-c', state: 'failed' });
    summary.counts.failed = 1;
    expect(report.summary).toEqual({ counts: { succeeded: 2, failed: 0 }, items: [{ id: 'client-a', state: 'succeeded' }, { id: 'client-b', state: 'succeeded' }] });
    expect(readJsonFile(runFile(report.run_id, 'report.json'))).toEqual(report);
  });

  it.each([
    ['free text in an item state', { counts: {}, items: [{ id: 'client-a', state: 'failed: password=x' }] }],
    ['a path as an item id', { counts: {}, items: [{ id: '/etc/shadow', state: 'failed' }] }],
    ['an extra field', { counts: {}, items: [], message: 'hello' }],
    ['a count that is not an integer', { counts: { failed: 0.5 }, items: [] }],
    ['the same item twice', { counts: {}, items: [{ id: 'a', state: 'failed' }, { id: 'a', state: 'failed' }] }],
    ['a count key that is not a code', { counts: { 'Failed!': 1 }, items: [] }],
    ['a negative count', { counts: { failed: -1 }, items: [] }],
    ['more count keys than allowed', { counts: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, 1])), items: [] }],
    ['an item with an extra field', { counts: {}, items: [{ id: 'a', state: 'failed', message: 'hello' }] }],
    ['an item id that is a number', { counts: {}, items: [{ id: 7, state: 'failed' }] }],
    ['items that are not a list', { counts: {}, items: { a: 'failed' } }],
    ['counts that are a list', { counts: [1], items: [] }],
    ['a missing field', { counts: {} }],
  ])('refuses %s with invalid_summary and leaves the run resumable', async (_what, summary) => {
    let runId = '';
    const code = await codeOf(() => runJob(spec({ stage_ids: ['alpha', 'beta'] }), stages, { workspace, summarize: () => summary as never, onCheckpoint: (e) => void (runId = e.runId) }));
    expect(code).toBe('invalid_summary');
    expect(readJsonFile(runFile(runId, 'job.json'))['status']).toBe('running');
    expect(existsSync(runFile(runId, 'report.json'))).toBe(false);
    const report = await runJob(spec({ stage_ids: ['alpha', 'beta'] }), stages, { workspace, resume: runId });
    expect(report.status).toBe('succeeded');
  });
});

describe('resuming', () => {
  it('re-enters a failed stage with its saved state, skips succeeded ones, and keeps the failed run and its report', async () => {
    const failing: JobStage[] = [
      { id: 'alpha', run: (ctx) => ctx.saveState({ a: 1 }) },
      { id: 'beta', run: (ctx) => { ctx.saveState({ requests: ['r-1'] }); throw new Error('boom'); } },
      { id: 'gamma', run: () => undefined },
    ];
    const first = await runJob(spec(), failing, { workspace });
    const firstReport = readFileSync(runFile(first.run_id, 'report.json'), 'utf8');
    const entries: unknown[] = [];
    const again: JobStage[] = STAGE_IDS.map((id) => ({ id, run: (ctx) => void entries.push([ctx.stageId, ctx.entry, ctx.attempt, ctx.state]) }));
    const second = await runJob(spec(), again, { workspace, resume: first.run_id });
    expect(entries).toEqual([
      ['beta', 'after_failure', 2, { requests: ['r-1'] }],
      ['gamma', 'first', 1, null],
    ]);
    expect(second).toMatchObject({ status: 'succeeded', resumed_from: first.run_id, job_id: first.run_id, started_at: first.started_at });
    expect(second.run_id).not.toBe(first.run_id);
    expect(second.stages[0]).toEqual(first.stages[0]); // carried over unchanged
    expect(readFileSync(runFile(first.run_id, 'report.json'), 'utf8')).toBe(firstReport);
    expect(readJsonFile(runFile(first.run_id, 'superseded.json'))).toEqual({ schema_version: 1, run_id: first.run_id, successor: second.run_id });
  });

  it('hands a stage the states its earlier stages saved, in the first run and after a resume, and refuses any other stage', async () => {
    const carried: unknown[] = [];
    const codes: string[] = [];
    const totals = (fail: boolean): JobStage[] =>
      STAGE_IDS.map((id, index) => ({
        id,
        run: async (ctx) => {
          const before = index === 0 ? 0 : (ctx.earlierState(STAGE_IDS[index - 1] as string) as { total: number }).total;
          carried.push([id, before]);
          if (index === 0) for (const other of [id, 'gamma', 'nope']) codes.push(await codeOf(() => ctx.earlierState(other)));
          ctx.saveState({ total: before + index + 1 });
          if (fail && id === 'gamma') throw new Error('stop here');
        },
      }));
    const first = await runJob(spec(), totals(true), { workspace });
    expect(codes).toEqual(['invalid_argument', 'invalid_argument', 'invalid_argument']);
    const resumed = await runJob(spec(), totals(false), { workspace, resume: first.run_id });
    expect(resumed.status).toBe('succeeded');
    // gamma, re-entered in the resumed run, reads beta's state carried over from the first run.
    expect(carried).toEqual([
      ['alpha', 0],
      ['beta', 1],
      ['gamma', 3],
      ['gamma', 3],
    ]);
  });

  it('re-enters a stage found running as after_interruption, once, and skips the stages before it', async () => {
    const source = await interruptAt(spec(), recordingStages(), { workspace }, 'before_stage', 1);
    expect(stageFile(source, 1)).toMatchObject({ status: 'running', attempts: 1 });
    const seen: unknown[] = [];
    const stages: JobStage[] = STAGE_IDS.map((id) => ({ id, run: (ctx) => void seen.push([id, ctx.entry, ctx.attempt]) }));
    const resumed = await runJob(spec(), stages, { workspace, resume: source });
    expect(seen).toEqual([
      ['beta', 'after_interruption', 2],
      ['gamma', 'first', 1],
    ]);
    expect(resumed.stages.map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it('refuses to resume a run that succeeded, writing nothing', async () => {
    const done = await runJob(spec(), recordingStages(), { workspace });
    const before = snapshotTree(workspace);
    const calls: string[] = [];
    expect(await codeOf(() => runJob(spec(), recordingStages(STAGE_IDS, calls), { workspace, resume: done.run_id }))).toBe('run_finished');
    expect(calls).toEqual([]);
    expect(snapshotTree(workspace)).toEqual(before);
  });

  it('refuses to resume a run twice, naming the run that took it over', async () => {
    const source = await interruptAt(spec(), recordingStages(), { workspace }, 'after_stage', 0);
    const successor = await runJob(spec(), recordingStages(), { workspace, resume: source });
    const before = snapshotTree(workspace);
    const error = await runJob(spec(), recordingStages(), { workspace, resume: source }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'run_superseded' });
    expect((error as Error).message).toContain(successor.run_id);
    expect(snapshotTree(workspace)).toEqual(before);
  });

  it('finishes a hand-over that a crash interrupted, under the successor id it had chosen', async () => {
    const source = await interruptAt(spec(), recordingStages(), { workspace }, 'after_stage', 0);
    const successor = randomUUID();
    // What a resume leaves when killed after marking the source and copying one stage, before its header.
    writeFileSync(runFile(source, 'superseded.json'), JSON.stringify({ schema_version: 1, run_id: source, successor }), { mode: 0o600 });
    mkdirSync(join(workspace, 'runs', successor), { mode: 0o700 });
    chmodSync(join(workspace, 'runs', successor), 0o700);
    writeFileSync(join(workspace, 'runs', successor, 'stage-00000.json'), readFileSync(runFile(source, 'stage-00000.json')), { mode: 0o600 });
    const calls: string[] = [];
    const report = await runJob(spec(), recordingStages(STAGE_IDS, calls), { workspace, resume: source });
    expect(report.run_id).toBe(successor);
    expect(calls).toEqual(['beta', 'gamma']);
    expect(runDirs(workspace)).toEqual([source, successor].sort());
  });

  it('refuses to resume from a workspace that does not exist, creating nothing', async () => {
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: randomUUID() }))).toBe('run_not_found');
    expect(existsSync(workspace)).toBe(false);
  });

  it('refuses to resume a run that does not exist, allocating nothing', async () => {
    await runJob(spec(), recordingStages(), { workspace });
    const before = runDirs(workspace);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: randomUUID() }))).toBe('run_not_found');
    expect(runDirs(workspace)).toEqual(before);
  });
});

describe('timestamps', () => {
  it('never go backwards in a ledger, even when the wall clock steps back, so the ledger stays resumable', async () => {
    const readings = [10_000, 9_000, 8_000, 7_000, 6_000, 5_000, 4_000, 3_000, 2_000, 1_000].map((ms) => new Date(Date.parse('2026-11-29T10:00:00.000Z') + ms));
    let next = 0;
    const clock = (): Date => readings[Math.min(next++, readings.length - 1)] as Date;
    const source = await interruptAt(spec(), recordingStages(), { workspace, clock }, 'after_stage', 1);
    const report = await runJob(spec(), recordingStages(), { workspace, resume: source, clock: () => new Date('2026-11-29T09:00:00.000Z') });
    const stamps = report.stages.flatMap((s) => [s.started_at, s.finished_at]).concat(report.finished_at);
    const sorted = [...stamps].sort();
    expect(stamps).toEqual(sorted);
    expect(report.stages.every((s) => s.duration_ms === 0)).toBe(true);
  });
});

describe('the workspace job lock', () => {
  it('makes a second run of the same job type fail fast with job_locked while a different job type runs', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((done) => (release = done));
    let entered: () => void = () => undefined;
    const holding = new Promise<void>((done) => (entered = done));
    const holder = runJob(spec({ stage_ids: ['alpha'] }), [{ id: 'alpha', run: async () => { entered(); await gate; } }], { workspace });
    await holding;
    // The holder is still inside its stage: an answer at all proves the second run did not wait for it.
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('job_locked');
    const other = await runJob(spec({ job_type: 'migrate-store' }), recordingStages(), { workspace });
    expect(other.status).toBe('succeeded');
    release();
    expect((await holder).status).toBe('succeeded');
    expect((await runJob(spec(), recordingStages(), { workspace })).status).toBe('succeeded'); // released with its holder
  });
});
