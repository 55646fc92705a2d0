/*
 * Benchmarks of the job envelope on a real file system: a fresh directory
 * under os.tmpdir() (override with ODUFLOW_BENCH_DIR to measure the disk the
 * workspace really lives on; on a tmpfs fsync is free and the numbers mean
 * nothing). Every checkpoint fsyncs its file and its directory, as in
 * production. Run: `npm run bench` in this package (or at the root).
 * See docs/benchmarks.md.
 *
 * The job is a realistic rollout: 20 stages (batches), each saving a state of
 * 200 targets with their request ids (~19 KiB of canonical JSON) once, so a
 * run writes 1 + 20 × 3 + 2 = 63 checkpoints.
 *
 * What an operator needs, and why:
 * - A rollout stage dispatches and polls 200 targets, which takes seconds to
 *   minutes; its three checkpoints must cost ≪ 1 s, and a whole 20-stage
 *   envelope (without the stages' own work) ≪ the minutes a rollout takes.
 * - A resume proves the source ledger (every stage record read, validated,
 *   copied) before it runs anything: an operator waits for it at the
 *   terminal, so ≪ 1 s for 20 stages at every checkpoint kind.
 * - readJob backs `rollout show` and a status endpoint: ≪ 100 ms.
 *
 * The enforced limits are regression ceilings, ≈ 10× the slower measured
 * mean on the reference 2-core machine (bench/targets.json, docs/benchmarks.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bench, describe } from 'vitest';
import { type CheckpointKind, type JobStage, type StageContext, readJob, runJob } from '../src/index.js';

const base = mkdtempSync(join(process.env['ODUFLOW_BENCH_DIR'] ?? tmpdir(), 'job-envelope-bench-'));
const removeBase = (): void => rmSync(base, { recursive: true, force: true });
let registered = 0;
let finished = 0;
/**
 * Resume benches consume one prepared source per iteration: a fixed number of
 * iterations, no warm-up. Their functions are `async` so tinybench does not
 * call them once more to find out whether they return a promise.
 */
const RESUMES = 12;

function envelopeBench(name: string, fn: () => void | Promise<void>, fixed = false): void {
  registered += 1;
  bench(name, fn, {
    throws: true,
    ...(fixed ? { iterations: RESUMES, time: 0, warmupIterations: 0, warmupTime: 0 } : { time: 400, warmupTime: 50 }),
    // Benchmark mode runs no afterAll hooks: the last bench's teardown removes the directory.
    teardown: (_task, mode) => {
      if (mode === 'run' && ++finished === registered) removeBase();
    },
  });
}
process.on('exit', removeBase);

const STAGES = Array.from({ length: 20 }, (_, index) => `batch-${String(index + 1).padStart(3, '0')}`);
/** 200 targets with fixed ids and request ids: the same bytes every run. */
const STATE = {
  requests: Object.fromEntries(
    Array.from({ length: 200 }, (_, index) => {
      const n = index.toString(16).padStart(12, '0');
      return [`client-0190e6a5-1c2d-7e3f-8a4b-${n}`, `6f1c2b8e-4d3a-4b5c-9e7f-${n}`];
    }),
  ),
};
const SPEC = {
  job_type: 'rollout',
  spec_version: 1,
  dry_run: false,
  inputs: { profile: 'configure', targets: Object.keys(STATE.requests) },
  stage_ids: STAGES,
  workspace_identity: 'bench',
};
const saving: JobStage[] = STAGES.map((id) => ({ id, run: (ctx) => ctx.saveState(STATE) }));
const idle: JobStage[] = STAGES.map((id) => ({ id, run: () => undefined }));

let counter = 0;
let sink: unknown;
const freshWorkspace = (): string => join(base, `ws-${counter++}`);

/** Runs the saving job and stops it right after `kind` (of stage 10 for the stage kinds); returns the run id. */
async function interrupted(workspace: string, kind: CheckpointKind, stageIndex?: number): Promise<string> {
  let stoppedAt: string | undefined;
  await runJob(SPEC, saving, {
    workspace,
    onCheckpoint: (event) => {
      if (event.kind === kind && (stageIndex === undefined || event.stage?.index === stageIndex)) {
        stoppedAt = event.runId;
        throw new Error('stop');
      }
    },
  }).catch((error: unknown) => {
    if (stoppedAt === undefined) throw error;
  });
  if (stoppedAt === undefined) throw new Error(`never reached ${kind}`);
  return stoppedAt;
}

/** One workspace per resume kind, holding RESUMES (+ 2 spare) interrupted runs each. */
async function prepare(kind: CheckpointKind, stageIndex?: number): Promise<{ workspace: string; sources: string[] }> {
  const workspace = freshWorkspace();
  const sources: string[] = [];
  for (let i = 0; i < RESUMES + 2; i++) sources.push(await interrupted(workspace, kind, stageIndex));
  return { workspace, sources };
}

const afterStart = await prepare('start');
const beforeStage = await prepare('before_stage', 9);
const afterStage = await prepare('after_stage', 9);
const beforeEnd = await prepare('after_stage', 19);
const ended = await prepare('end');

async function resumeNext(prepared: { workspace: string; sources: string[] }): Promise<void> {
  const source = prepared.sources.pop();
  if (source === undefined) throw new Error('out of prepared sources');
  sink = await runJob(SPEC, idle, { workspace: prepared.workspace, resume: source });
}

// A stage kept open for the whole run, so saveState can be measured alone.
let ctx: StageContext | undefined;
let release: () => void = () => undefined;
const held = new Promise<void>((done) => (release = done));
const open = new Promise<void>((entered) => {
  void runJob({ ...SPEC, job_type: 'held', stage_ids: ['held'] }, [{ id: 'held', run: async (c) => { ctx = c; entered(); await held; } }], {
    workspace: freshWorkspace(),
  });
});
await open;
process.on('exit', release);

const finishedRun = await runJob(SPEC, saving, { workspace: join(base, 'finished') });

describe('checkpoints (fsync of file and directory)', () => {
  envelopeBench('run a 20-stage job, each stage saving 200 targets (63 checkpoints)', async () => {
    sink = await runJob(SPEC, saving, { workspace: freshWorkspace() });
  });
  envelopeBench('saveState of 200 targets (one checkpoint)', () => {
    ctx?.saveState({ ...STATE, n: counter++ });
  });
});

describe('resume of a 20-stage job (prove, hand over, finish)', () => {
  envelopeBench('after start (20 stages left)', async () => resumeNext(afterStart), true);
  envelopeBench('after before_stage of stage 10 (11 left)', async () => resumeNext(beforeStage), true);
  envelopeBench('after after_stage of stage 10 (10 left)', async () => resumeNext(afterStage), true);
  envelopeBench('after the last after_stage (only end left)', async () => resumeNext(beforeEnd), true);
  envelopeBench('after end (proved, then refused: run_finished)', async () => {
    const source = ended.sources[counter++ % RESUMES] as string;
    sink = await runJob(SPEC, idle, { workspace: ended.workspace, resume: source }).catch((error: unknown) => error);
  });
});

describe('readers', () => {
  envelopeBench('readJob of a finished 20-stage run', () => {
    sink = readJob(join(base, 'finished'), finishedRun.run_id);
  });
});

export const lastResult = (): unknown => sink;
