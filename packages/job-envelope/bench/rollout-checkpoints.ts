import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bareAtomicWrite, interleaved, rowOf, summarize as summaryOf, timeMs, type BenchIdentity } from '../../test-harness/src/bench/measure.js';
import type { BenchMode, BenchResult, BenchRow } from '../../test-harness/src/bench/result.js';
import { canonicalJson } from '@oduflow/protocol';
import { readJob, runJob, type CheckpointKind, type JobStage, type JobSummary, type SummaryInput } from '../src/index.js';

/*
 * Issue 12, item 7: what a rollout's checkpoints cost, counted and timed
 * against the bare atomic writes of the same bytes.
 *
 * The job is a rollout of 10 000 targets as the master runs it (the job
 * envelope with the rollout's spec, stage states and summary), with a no-op
 * dispatcher: every stage saves what a rollout batch saves — its targets with
 * their request ids fixed before anything is dispatched, the rows after the
 * dispatches, the settled rows with the error budget — and reads its
 * predecessor's state for the budget, as batch-stage.ts does; dispatch and
 * poll themselves do nothing (their cost is items 3 and 5). So what is
 * measured is the envelope's checkpoints alone.
 *
 * Counting: after every checkpoint (each onCheckpoint event and each
 * saveState), the run's files are compared with the previous look; a file
 * with a new inode was (atomically) written, and its size is the bytes.
 * That count, file by file, is replayed as bare atomic writes of the same
 * sizes for the floor. The directory is under os.tmpdir() (a real disk
 * here; on a tmpfs fsync is free and the ratios mean nothing).
 */

export const BENCHES: readonly BenchIdentity[] = [{ id: 'rollout-checkpoints', item: 7, title: 'Rollouts: checkpoints per stage and resume' }];

const SIZES: Record<BenchMode, { readonly targets: number; readonly batch: number; readonly runs: number; readonly resumes: number }> = {
  smoke: { targets: 200, batch: 50, runs: 1, resumes: 1 },
  default: { targets: 10_000, batch: 1_000, runs: 5, resumes: 5 },
  full: { targets: 10_000, batch: 100, runs: 5, resumes: 5 },
};

const minion = (n: number): string => `client-0190e6a5-1c2d-7e3f-8a4b-${n.toString(16).padStart(12, '0')}`;
const requestOf = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;

// A type, not an interface: only a type alias is assignable to the envelope's JsonValue.
type Row = {
  blocked_by: null;
  detail: null;
  minion_id: string;
  outcome: string;
  passed: number | null;
  reason: null;
  record_state: string | null;
  request_id: string;
  total: number | null;
};

/** The rollout's stage state (stage-state.ts) of batch `index`, its keys in canonical order as stateValue builds them. */
function stageState(size: { targets: number; batch: number }, index: number, step: 'fixed' | 'dispatched' | 'settled') {
  const targets: Row[] = [];
  for (let n = index * size.batch; n < Math.min(size.targets, (index + 1) * size.batch); n += 1) {
    targets.push({
      blocked_by: null,
      detail: null,
      minion_id: minion(n),
      outcome: step === 'settled' ? 'succeeded' : 'pending',
      passed: step === 'settled' ? 60 : null,
      reason: null,
      record_state: step === 'fixed' ? null : step === 'dispatched' ? 'published' : 'succeeded',
      request_id: requestOf(n),
      total: step === 'settled' ? 60 : null,
    });
  }
  return { batch_size: size.batch, budget_used: step === 'settled' ? 0 : null, max_unresolved: 0, profile: 'configure', target_count: size.targets, targets, version: 1 };
}

function specOf(size: { targets: number; batch: number }) {
  const stages = Math.ceil(size.targets / size.batch);
  return {
    job_type: 'rollout',
    spec_version: 1,
    dry_run: false,
    inputs: {
      profile: 'configure',
      state_digest: '',
      targets: Array.from({ length: size.targets }, (_, n) => minion(n)),
      batch_size: size.batch,
      max_unresolved: 0,
    },
    stage_ids: Array.from({ length: stages }, (_, i) => `batch-${String(i + 1).padStart(4, '0')}`),
    workspace_identity: 'record-store:bench',
  };
}

/** The rollout's summary (start-rollout.ts): counts by outcome and one item per target. */
function summarize(input: SummaryInput): JobSummary {
  const rows = input.stages.flatMap((stage) => ((stage.state as { targets?: Row[] } | null)?.targets ?? []));
  const counts: Record<string, number> = {};
  for (const row of rows) counts[row.outcome] = (counts[row.outcome] ?? 0) + 1;
  return { counts, items: rows.map((row) => ({ id: row.minion_id, state: row.outcome })) };
}

/** Files under `dir` by path: inode and size. */
function look(dir: string, into = new Map<string, { ino: number; size: number }>()): Map<string, { ino: number; size: number }> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) look(path, into);
    else if (entry.isFile()) {
      const stat = lstatSync(path);
      into.set(path, { ino: stat.ino, size: stat.size });
    }
  }
  return into;
}

/** Counts the files (re)written since the last look, and their bytes. */
class WriteCounter {
  #last = new Map<string, { ino: number; size: number }>();
  readonly #dir: string;
  constructor(dir: string) {
    this.#dir = dir;
  }
  take(): number[] {
    const now = look(this.#dir);
    const written: number[] = [];
    for (const [path, file] of now) if (this.#last.get(path)?.ino !== file.ino) written.push(file.size);
    this.#last = now;
    return written;
  }
}

interface Checkpoint {
  readonly kind: CheckpointKind | 'save';
  readonly stage: number | null;
  readonly sizes: number[];
}

type Spec = ReturnType<typeof specOf>;

/** The rollout's stages with the no-op dispatcher; `after` runs after each saveState (the counter's look). */
function stagesOf(size: { targets: number; batch: number }, spec: Spec, after: (stage: number) => void): JobStage[] {
  return spec.stage_ids.map((id, index) => ({
    id,
    run: (ctx) => {
      if (index > 0) ctx.earlierState(spec.stage_ids[index - 1] as string);
      for (const step of ['fixed', 'dispatched', 'settled'] as const) {
        ctx.saveState(stageState(size, index, step));
        after(index);
      }
    },
  }));
}

/**
 * A whole rollout (or a resume of `resume`) in `workspace`, its checkpoints
 * counted; a resume of a finished run is refused with nothing written (its
 * rejection is expected when `refused`).
 */
async function countedRun(size: { targets: number; batch: number }, spec: Spec, workspace: string, resume?: { source: string; refused: boolean }): Promise<Checkpoint[]> {
  mkdirSync(workspace, { recursive: true, mode: 0o700 });
  const counter = new WriteCounter(workspace);
  counter.take();
  const checkpoints: Checkpoint[] = [];
  const stages = stagesOf(size, spec, (stage) => checkpoints.push({ kind: 'save', stage, sizes: counter.take() }));
  await runJob(spec, stages, {
    workspace,
    summarize,
    ...(resume === undefined ? {} : { resume: resume.source }),
    onCheckpoint: (event) => checkpoints.push({ kind: event.kind, stage: event.stage?.index ?? null, sizes: counter.take() }),
  }).catch((error: unknown) => {
    if (resume?.refused !== true) throw error;
  });
  return checkpoints;
}

/** Runs the rollout until `kind` (of stage `stageIndex` for the stage kinds) and stops it there, as a crash would; returns the run id. */
async function interruptedAt(size: { targets: number; batch: number }, spec: Spec, workspace: string, kind: CheckpointKind, stageIndex?: number): Promise<string> {
  let stoppedAt: string | undefined;
  await runJob(spec, stagesOf(size, spec, () => undefined), {
    workspace,
    summarize,
    onCheckpoint: (event) => {
      if (stoppedAt === undefined && event.kind === kind && (stageIndex === undefined || event.stage?.index === stageIndex)) {
        stoppedAt = event.runId;
        throw new Error('stop here');
      }
    },
  }).catch((error: unknown) => {
    if (stoppedAt === undefined) throw error;
  });
  if (stoppedAt === undefined) throw new Error(`never reached ${kind}`);
  return stoppedAt;
}

export async function run(mode: BenchMode): Promise<BenchResult[]> {
  const size = SIZES[mode];
  const spec = specOf(size);
  const stageCount = spec.stage_ids.length;
  const middle = Math.floor(stageCount / 2);
  const base = mkdtempSync(join(tmpdir(), 'oduflow-bench-rollout-'));
  const floorDir = join(base, 'floor');
  mkdirSync(floorDir, { mode: 0o700 });
  let workspaces = 0;
  const fresh = (): string => join(base, `ws-${workspaces++}`);
  try {
    // 1. One counted rollout: writes and bytes per checkpoint kind and per stage.
    const countedWorkspace = fresh();
    const counted = await countedRun(size, spec, countedWorkspace);
    const perStage = Array.from({ length: stageCount }, (_, i) => counted.filter((c) => c.stage === i));
    const writesPerStage = perStage.map((cs) => cs.reduce((n, c) => n + c.sizes.length, 0));
    const kibPerStage = perStage.map((cs) => cs.reduce((n, c) => n + c.sizes.reduce((a, b) => a + b, 0), 0) / 1024);
    const allSizes = counted.flatMap((c) => c.sizes);
    const totalKiB = allSizes.reduce((a, b) => a + b, 0) / 1024;
    const startWrites = counted.filter((c) => c.kind === 'start').flatMap((c) => c.sizes);
    const endWrites = counted.filter((c) => c.kind === 'end').flatMap((c) => c.sizes);
    const saveSizes = counted.filter((c) => c.kind === 'save').flatMap((c) => c.sizes);
    const payloads = allSizes.map((bytes) => Buffer.alloc(bytes, 0x61));

    // 2. Whole rollouts (no-op dispatch) against bare atomic writes of the same sizes, interleaved.
    const whole = await interleaved(
      size.runs,
      async () => {
        const workspace = fresh();
        mkdirSync(workspace, { mode: 0o700 });
        return timeMs(() => runJob(spec, stagesOf(size, spec, () => undefined), { workspace, summarize }));
      },
      async () =>
        timeMs(() => {
          payloads.forEach((bytes, i) => bareAtomicWrite(floorDir, `w-${i % 64}.json`, bytes));
        }),
    );

    // 3. Resume from each checkpoint kind: prove the source run, hand it over, finish.
    const kinds: { label: string; kind: CheckpointKind; stage?: number }[] = [
      { label: `after start (${stageCount} stages left)`, kind: 'start' },
      { label: `after before_stage of stage ${middle + 1} (${stageCount - middle} left)`, kind: 'before_stage', stage: middle },
      { label: `after after_stage of stage ${middle + 1} (${stageCount - middle - 1} left)`, kind: 'after_stage', stage: middle },
      { label: 'after the last after_stage (only end left)', kind: 'after_stage', stage: stageCount - 1 },
      { label: 'after end (proved, then refused: run_finished)', kind: 'end' },
    ];
    const resumeRows: BenchRow[] = [];
    const resumeIo: string[] = [];
    for (const { label, kind, stage } of kinds) {
      const workspace = fresh();
      mkdirSync(workspace, { mode: 0o700 });
      const sources: string[] = [];
      // One more source than measured: the first resume is counted (outside any timer) to size the floor.
      for (let i = 0; i <= size.resumes; i += 1) sources.push(await interruptedAt(size, spec, workspace, kind, stage));
      const resume = (source: string): Promise<unknown> =>
        runJob(spec, stagesOf(size, spec, () => undefined), { workspace, summarize, resume: source }).catch((error: unknown) => {
          if (kind !== 'end') throw error;
        });
      const calibration = sources.pop() as string;
      const counted = await countedRun(size, spec, workspace, { source: calibration, refused: kind === 'end' });
      const written = counted.flatMap((c) => c.sizes).map((bytes) => Buffer.alloc(bytes, 0x61));
      const sourceFiles = [...look(join(workspace, 'runs', calibration)).keys()];
      const parse = (path: string): unknown => {
        const text = readFileSync(path, 'utf8');
        return path.endsWith('.json') && text !== '' ? (JSON.parse(text) as unknown) : text;
      };
      const { values, floors } = await interleaved(
        size.resumes,
        async () => timeMs(() => resume(sources.pop() as string)),
        async () =>
          timeMs(() => {
            for (const path of sourceFiles) parse(path);
            written.forEach((bytes, i) => bareAtomicWrite(floorDir, `r-${i % 64}.json`, bytes));
          }),
      );
      resumeRows.push(rowOf({ label: `resume ${label}`, unit: 'ms', values, floors, target: null }));
      resumeIo.push(`${label}: reads ${sourceFiles.length} files, writes ${written.length}`);
    }

    // 4. One save alone, the old regression guard: saveState of a batch vs a bare write of its bytes.
    const saveBytes = Buffer.alloc(saveSizes[saveSizes.length - 1] ?? 1, 0x61);
    const heldWorkspace = fresh();
    mkdirSync(heldWorkspace, { mode: 0o700 });
    const settledState = stageState(size, 0, 'settled');
    const saves = await new Promise<{ values: number[]; floors: number[] }>((resolve, reject) => {
      runJob({ ...spec, job_type: 'held', stage_ids: ['held'] }, [
        {
          id: 'held',
          run: async (ctx) => {
            resolve(
              await interleaved(
                size.runs * 3,
                async () => timeMs(() => ctx.saveState(settledState)),
                async () => timeMs(() => bareAtomicWrite(floorDir, 'state.json', saveBytes)),
              ),
            );
          },
        },
      ], { workspace: heldWorkspace }).catch(reject);
    });

    // 4b. What a saveState spends before its write: the canonical serialization, vs the native one.
    let text = '';
    const serialize = await interleaved(
      size.runs * 3,
      async () => timeMs(() => (text = canonicalJson(settledState))),
      async () => timeMs(() => (text = JSON.stringify(settledState))),
    );
    if (text === '') throw new Error('nothing was serialized');

    // 5. readJob of the finished rollout (`rollout show`): the proof and the report check, vs reading its files.
    const [finishedRun] = readdirSync(join(countedWorkspace, 'runs'));
    if (finishedRun === undefined) throw new Error('the counted rollout left no run');
    // Its JSON files (a lock or marker file may be empty).
    const finishedFiles = [...look(join(countedWorkspace, 'runs', finishedRun))].filter(([path, file]) => path.endsWith('.json') && file.size > 0).map(([path]) => path);
    let sink: unknown;
    const reads = await interleaved(
      size.runs * 3,
      async () => timeMs(() => (sink = readJob(countedWorkspace, finishedRun))),
      async () => timeMs(() => (sink = finishedFiles.map((path) => JSON.parse(readFileSync(path, 'utf8')) as unknown))),
    );
    if (sink === undefined) throw new Error('nothing was read');

    const stats = (xs: number[]): string => {
      const s = summaryOf(xs);
      return s.min === s.max ? `${s.median}` : `${s.median} (${s.min}–${s.max})`;
    };
    const kib = (bytes: number): string => (bytes / 1024).toFixed(1);
    return [
      {
        schema: 1,
        ...(BENCHES[0] as BenchIdentity),
        method:
          `A rollout of ${size.targets.toLocaleString('en-US')} targets in ${stageCount} batches of ${size.batch.toLocaleString('en-US')}, through the real job envelope (runJob) with the rollout’s spec, stage states (three saves per batch: request ids fixed, dispatched, settled; the predecessor’s state read for the error budget) and summary, and a no-op dispatcher, in a workspace under os.tmpdir() (a real disk here). ` +
          `Writes and bytes are counted from the files each checkpoint replaced (a new inode). Whole rollouts: ${size.runs} runs interleaved with the floor; resumes: ${size.resumes} per checkpoint kind, each from its own interrupted run (stopped at that checkpoint as a crash would), interleaved with the floor; one saveState of a ${size.batch.toLocaleString('en-US')}-target batch and readJob of the finished rollout: ${size.runs * 3} times each, interleaved.`,
        floor:
          'Bare atomic writes (write, fsync, rename, directory fsync) in the same file system: for the whole rollout, one per file the rollout wrote, of the same sizes in the same order; for a saveState, one of the state’s size; for a resume, reading (and JSON.parse of) every file of the source run once plus one bare write per file the resume writes, of the same sizes (counted on an extra resume of the same kind); for readJob, readFileSync + JSON.parse of every file of the run; for canonicalJson, JSON.stringify of the same value.',
        mode,
        rows: [
          rowOf({ label: 'checkpoint writes per stage', unit: 'writes', values: writesPerStage, target: null }),
          rowOf({ label: 'checkpoint bytes per stage', unit: 'KiB', values: kibPerStage, target: null }),
          rowOf({ label: `whole rollout, no-op dispatch (${allSizes.length} writes, ${totalKiB.toFixed(0)} KiB)`, unit: 'ms', values: whole.values, floors: whole.floors, target: { kind: 'ratio_max', value: 1.5 } }),
          rowOf({ label: `saveState of a ${size.batch.toLocaleString('en-US')}-target batch (${kib(saveBytes.length)} KiB)`, unit: 'ms', values: saves.values, floors: saves.floors, target: { kind: 'ratio_max', value: 1.5 } }),
          rowOf({ label: `canonicalJson of that batch state (what a saveState serializes)`, unit: 'ms', values: serialize.values, floors: serialize.floors, target: null }),
          ...resumeRows,
          rowOf({ label: 'readJob of the finished rollout (rollout show)', unit: 'ms', values: reads.values, floors: reads.floors, target: null }),
        ],
        chart: null,
        notes: [
          `Per stage: ${stats(writesPerStage)} writes (the before_stage and after_stage checkpoints and the batch’s three saves), ${stats(kibPerStage.map((k) => Math.round(k)))} KiB. The start checkpoint writes ${startWrites.length} file(s) (${kib(startWrites.reduce((a, b) => a + b, 0))} KiB), the end ${endWrites.length} (${kib(endWrites.reduce((a, b) => a + b, 0))} KiB, the report with one item per target).`,
          'A saveState makes the state’s canonical text once (the domain walk and one native JSON.stringify: the rollout builds its rows with their keys in canonical order, so nothing is sorted), checks its size, and writes that text into the stage record (one file fsync, one directory fsync); the text is the runner’s copy until the stage ends, so a save neither parses nor serializes it again. The floor writes bytes made in advance, so what a ratio above 1 measures is that CPU (about 1 ms per 225 KiB state, the canonicalJson row) against the disk: on a disk whose fsync is slow (the floor near 200 ms) the whole rollout is near 1.4×, when it is cheap (the floor near 50–100 ms) 2–3×. Closing that would take a cheaper domain walk in @oduflow/protocol (it reads every key of every row) or not proving the state canonical at all, which the envelope does not give up.',
          'A resume reads and validates every stage record of the source run, copies the reached ones into the new run, then runs what is left (here with the no-op dispatcher, so its remaining checkpoints are in it); its floor is reading and JSON.parse of the source run’s files once and making the same writes bare, so the ratio is the cost of proving (canonical form, schemas, the chain of stages) and handing over. Reported without a target: the issue sets none, and an operator waits for a resume once.',
          `What each resume reads and writes: ${resumeIo.join('; ')}.`,
        ],
        ok: true,
      },
    ];
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}
