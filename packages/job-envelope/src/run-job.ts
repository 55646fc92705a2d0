import { randomUUID } from 'node:crypto';
import { type JsonValue, isRequestId } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { JobEnvelopeError } from './errors.js';
import { type CompatibilityFields, compatibilityOf, resumeFingerprint } from './fingerprint.js';
import {
  DECLARED_FAILURE_MESSAGE,
  INTERNAL_STAGE_ERROR,
  type JobRun,
  type Ledger,
  type LedgerStage,
  type RunStatus,
  type StageError,
  type StageRecord,
  type StageStatus,
  canonicalStateText,
  detachedState,
  stateOfText,
} from './ledger.js';
import { JOB_SCHEMA_VERSION } from './limits.js';
import { type JobReport, type JobSummary, buildReport, parseJobSummary } from './report.js';
import { type JobSpec, type JobSpecInput, parseJobSpec } from './spec.js';
import { DeclaredStageFailure, type JobStage, type StageContext, type StageEntry, checkStages } from './stage.js';
import { monotonicStamps } from './time.js';
import {
  type OwnedRun,
  type Workspace,
  allocateRun,
  checkHandOverLeftovers,
  loadRun,
  openRunDir,
  openScratch,
  openWorkspace,
  runHasHeader,
  takeJobLock,
  writeReport,
  writeRunHeader,
  writeStageRecord,
  writeSuperseded,
} from './workspace.js';

/** The durable boundaries of a run, in the order they happen. */
export const CHECKPOINT_KINDS = ['start', 'before_stage', 'after_stage', 'end'] as const;
export type CheckpointKind = (typeof CHECKPOINT_KINDS)[number];

/** Reported after each checkpoint is durable (for progress display). */
export interface CheckpointEvent {
  readonly kind: CheckpointKind;
  readonly jobId: string;
  readonly runId: string;
  /** The stage of a `before_stage` / `after_stage` checkpoint; null for `start` and `end`. */
  readonly stage: { readonly id: string; readonly index: number; readonly status: StageStatus } | null;
  readonly runStatus: RunStatus;
}

/** What the summary hook sees once the run has finished. */
export interface SummaryInput {
  readonly dryRun: boolean;
  readonly status: 'succeeded' | 'failed';
  readonly stages: readonly { readonly stage_id: string; readonly status: StageStatus; readonly state: JsonValue | null }[];
}

export interface RunJobOptions {
  /** Absolute path of the workspace directory (created 0700 for a new run; must exist to resume). */
  readonly workspace: string;
  /** The run id to resume. Omitted: a new job. */
  readonly resume?: string;
  /**
   * The id of a new job's first run, which is also its job id (default: a
   * random UUID). A caller that must find its job again from its own key
   * (an HTTP service binding an Idempotency-Key) derives it. A canonical
   * UUID not used by any run of the workspace; `invalid_argument` with
   * `resume`, or when a run with this id has committed a checkpoint.
   */
  readonly runId?: string;
  /**
   * Aborting it stops the run as a crash would, without the crash: no
   * checkpoint is written after the abort (the stage in progress, told
   * through `ctx.signal`, may still save its own state until it settles; its
   * outcome is not recorded), the locks are released, and runJob rejects with
   * `aborted`. The run then reads as `interrupted` and can be resumed.
   */
  readonly signal?: AbortSignal;
  /** Builds the report's closed summary from the final stage states (validated; `invalid_summary`). */
  readonly summarize?: (input: SummaryInput) => JobSummary;
  /** Called after each checkpoint is durable. If it throws, the run stops there and can be resumed. */
  readonly onCheckpoint?: (event: CheckpointEvent) => void;
  /** The wall clock (UTC); the runner never writes a timestamp earlier than one already in the ledger. */
  readonly clock?: () => Date;
}

interface CheckedOptions {
  readonly workspace: string;
  readonly resume: string | undefined;
  readonly runId: string | undefined;
  readonly signal: AbortSignal;
  readonly summarize: RunJobOptions['summarize'];
  readonly onCheckpoint: RunJobOptions['onCheckpoint'];
  readonly clock: () => Date;
}

function checkOptions(options: RunJobOptions): CheckedOptions {
  // A caller in plain JavaScript may pass anything.
  const given: unknown = options;
  if (typeof given !== 'object' || given === null) throw new JobEnvelopeError('invalid_argument', 'runJob needs an options object');
  if (typeof options.workspace !== 'string' || !options.workspace.startsWith('/')) {
    throw new JobEnvelopeError('invalid_argument', 'the workspace must be an absolute path');
  }
  if (options.resume !== undefined && !isRequestId(options.resume)) {
    throw new JobEnvelopeError('invalid_argument', 'a run id to resume must be a canonical UUID');
  }
  if (options.runId !== undefined && (!isRequestId(options.runId) || options.resume !== undefined)) {
    throw new JobEnvelopeError('invalid_argument', 'the run id of a new job must be a canonical UUID, and only without resume');
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new JobEnvelopeError('invalid_argument', 'the signal option must be an AbortSignal');
  }
  for (const hook of ['summarize', 'onCheckpoint', 'clock'] as const) {
    if (options[hook] !== undefined && typeof options[hook] !== 'function') {
      throw new JobEnvelopeError('invalid_argument', `the ${hook} option must be a function`);
    }
  }
  return {
    workspace: options.workspace,
    resume: options.resume,
    runId: options.runId,
    // A signal that never aborts keeps the checks below unconditional.
    signal: options.signal ?? new AbortController().signal,
    summarize: options.summarize,
    onCheckpoint: options.onCheckpoint,
    clock: options.clock ?? (() => new Date()),
  };
}

/** Where a run starts from: a new job, or the proven ledger of the run it resumes. */
interface Plan {
  readonly runId: string;
  readonly jobId: string;
  readonly resumedFrom: string | null;
  readonly jobStartedAt: string | null;
  readonly stages: readonly LedgerStage[];
  /** The latest timestamp already in the ledger: the runner's clock never goes below it. */
  readonly floor: string | undefined;
  /** True when finishing a hand-over an earlier resume began (its run directory may exist). */
  readonly handOver: boolean;
}

/** Thrown at each point where an aborted run stops: nothing after it is written. */
function stopIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new JobEnvelopeError('aborted', 'the run was stopped by its caller; it is left interrupted and can be resumed');
}

/** A new job; under the job lock, so a chosen run id is checked against the runs that exist. */
function freshPlan(workspace: Workspace, spec: JobSpec, chosen: string | undefined): Plan {
  if (chosen !== undefined && runHasHeader(workspace, chosen)) {
    throw new JobEnvelopeError('invalid_argument', `run ${chosen} already exists; a new job needs a run id of its own`);
  }
  const runId = chosen ?? randomUUID();
  const stages = spec.stage_ids.map(
    (stage_id): LedgerStage => ({ stage_id, status: 'pending', started_at: null, finished_at: null, attempts: 0, error: null, state: null }),
  );
  return { runId, jobId: runId, resumedFrom: null, jobStartedAt: null, stages, floor: undefined, handOver: false };
}

function latestTimestamp(run: JobRun, stages: readonly LedgerStage[]): string {
  const stamps = [run.job_started_at, run.created_at, run.finished_at, ...stages.flatMap((s) => [s.started_at, s.finished_at])];
  return stamps.filter((s): s is string => s !== null).reduce((a, b) => (Date.parse(b) > Date.parse(a) ? b : a));
}

/**
 * The read-only part of a resume: the source is loaded and proven
 * consistent (validateLedger: schema, bindings, unique stage ids, stored
 * fingerprint = recomputation from its persisted fields, stage order,
 * timestamps, error tuples), its trusted fingerprint is compared with the
 * requested job's, and it must still be resumable. Nothing is written, not
 * even a lock file.
 */
function proveSource(workspace: Workspace, sourceId: string, fingerprint: string): { ledger: Ledger; successor: string | null } {
  const sourceDir = openRunDir(workspace, sourceId);
  try {
    const { ledger, superseded } = loadRun(sourceDir, sourceId);
    if (ledger.run.fingerprint !== fingerprint) {
      throw new JobEnvelopeError(
        'resume_mismatch',
        `run ${sourceId} belongs to a different job (inputs, mode, versions, stages, job type or workspace identity differ)`,
      );
    }
    if (ledger.run.status === 'succeeded') throw new JobEnvelopeError('run_finished', `run ${sourceId} already succeeded; there is nothing to resume`);
    if (superseded !== null && runHasHeader(workspace, superseded.successor)) {
      throw new JobEnvelopeError('run_superseded', `run ${sourceId} was already resumed by run ${superseded.successor}; resume that run instead`);
    }
    // A marker whose successor never committed a header is a hand-over a crash interrupted: finish it under that id.
    return { ledger, successor: superseded?.successor ?? null };
  } finally {
    sourceDir.close();
  }
}

/**
 * Under the job lock: proves the source again (a runner or another resume
 * may have changed it before we held the lock), then marks it as taken over
 * — the first write of a resume — naming the successor run.
 */
function resumePlan(workspace: Workspace, sourceId: string, fingerprint: string): Plan {
  const { ledger, successor: pending } = proveSource(workspace, sourceId, fingerprint);
  const { run, stages } = ledger;
  const successor = pending ?? randomUUID();
  const sourceDir = openRunDir(workspace, sourceId);
  try {
    writeSuperseded(sourceDir, { schema_version: JOB_SCHEMA_VERSION, run_id: sourceId, successor });
  } finally {
    sourceDir.close();
  }
  return {
    runId: successor,
    jobId: run.job_id,
    resumedFrom: sourceId,
    jobStartedAt: run.job_started_at,
    stages,
    floor: latestTimestamp(run, stages),
    handOver: pending !== null,
  };
}

function stageRecord(runId: string, index: number, stage: LedgerStage): StageRecord {
  return {
    schema_version: JOB_SCHEMA_VERSION,
    run_id: runId,
    index,
    stage_id: stage.stage_id,
    status: stage.status as StageRecord['status'],
    started_at: stage.started_at,
    finished_at: stage.finished_at,
    attempts: stage.attempts,
    error: stage.error,
    state: stage.state,
  };
}

/**
 * A stage's failure, as data. Nothing of the thrown value is read except our
 * own marker on ctx.fail's error (guarded: a hostile object or proxy ends up
 * as the internal tuple too).
 */
function sanitizeFailure(thrown: unknown, declared: readonly string[]): StageError {
  let code: string | undefined;
  try {
    code = DeclaredStageFailure.codeOf(thrown);
  } catch {
    code = undefined;
  }
  if (code !== undefined && declared.includes(code)) return { category: 'stage', code, message: DECLARED_FAILURE_MESSAGE };
  return { ...INTERNAL_STAGE_ERROR };
}

function entryOf(stage: LedgerStage): StageEntry {
  if (stage.status === 'running') return 'after_interruption';
  if (stage.status === 'failed') return 'after_failure';
  return 'first';
}

/** One runner: the owned run directory, its header, and its clock. */
class Runner {
  readonly #owned: OwnedRun;
  readonly #stamp: () => string;
  readonly #options: CheckedOptions;
  readonly #spec: JobSpec;
  #header: JobRun;

  constructor(owned: OwnedRun, spec: JobSpec, header: JobRun, stamp: () => string, options: CheckedOptions) {
    this.#owned = owned;
    this.#spec = spec;
    this.#header = header;
    this.#stamp = stamp;
    this.#options = options;
  }

  get #dir(): PrivateDir {
    return this.#owned.dir;
  }

  #emit(kind: CheckpointKind, stage: CheckpointEvent['stage']): void {
    this.#options.onCheckpoint?.({ kind, jobId: this.#header.job_id, runId: this.#header.run_id, stage, runStatus: this.#header.status });
  }

  /** Checkpoint `start`: the reached stages (copied from a resumed run) first, then the header. */
  start(stages: readonly LedgerStage[]): void {
    stages.forEach((stage, index) => {
      if (stage.status !== 'pending') writeStageRecord(this.#dir, stageRecord(this.#header.run_id, index, stage));
    });
    // Written last: a header never exists while a stage it reached is missing (it would read as pending).
    writeRunHeader(this.#dir, this.#header, this.#header.run_id, true);
    this.#emit('start', null);
  }

  /**
   * Checkpoints `before_stage` and `after_stage` around one stage; returns its
   * final ledger entry. `ledger`: the job's stages as reached so far (those
   * before `index` have succeeded).
   */
  async runStage(stage: JobStage, index: number, previous: LedgerStage, ledger: readonly LedgerStage[]): Promise<LedgerStage> {
    const runId = this.#header.run_id;
    // The stage's state: the ledger's value, until a save in this run makes its canonical text the latest (`saved`),
    // kept as text so a save neither parses nor serializes it again; it becomes a value once, when the stage ends.
    const state = previous.state;
    let saved: string | null | undefined;
    const running: LedgerStage = { ...previous, status: 'running', started_at: this.#stamp(), finished_at: null, attempts: previous.attempts + 1, error: null };
    writeStageRecord(this.#dir, stageRecord(runId, index, running));
    this.#emit('before_stage', { id: stage.id, index, status: 'running' });

    let open = true;
    const dir = this.#dir;
    const ctx: StageContext = {
      jobId: this.#header.job_id,
      runId,
      stageId: stage.id,
      stageIndex: index,
      dryRun: this.#spec.dry_run,
      entry: entryOf(previous),
      attempt: running.attempts,
      runDir: dir.path,
      signal: this.#options.signal,
      get state() {
        return saved === undefined ? detachedState(state) : stateOfText(saved, true);
      },
      saveState(value) {
        if (!open) throw new JobEnvelopeError('invalid_stage_state', 'a stage may save its state only while it runs');
        const text = canonicalStateText(value);
        writeStageRecord(dir, stageRecord(runId, index, running), text);
        saved = text;
      },
      earlierState(stageId) {
        const position = ledger.findIndex((s) => s.stage_id === stageId);
        const found = position >= 0 && position < index ? ledger[position] : undefined;
        if (found === undefined) throw new JobEnvelopeError('invalid_argument', `stage ${index} asked for the state of a stage that is not before it`);
        return detachedState(found.state);
      },
      fail(code) {
        throw new DeclaredStageFailure(code);
      },
      scratch: () => openScratch(dir, runId),
    };
    let error: StageError | null = null;
    try {
      await stage.run(ctx);
    } catch (thrown) {
      error = sanitizeFailure(thrown, stage.failureCodes ?? []);
    } finally {
      open = false;
    }
    // Aborted while it ran: whatever it returned or threw is not its outcome. It stays running, re-entered on resume.
    stopIfAborted(this.#options.signal);
    const finished: LedgerStage = { ...running, status: error === null ? 'succeeded' : 'failed', finished_at: this.#stamp(), error, state: saved === undefined ? state : stateOfText(saved) };
    writeStageRecord(this.#dir, stageRecord(runId, index, finished));
    this.#emit('after_stage', { id: stage.id, index, status: finished.status });
    return finished;
  }

  /** Checkpoint `end`: the report first, then the terminal header (the commit point of the run). */
  finish(stages: readonly LedgerStage[], status: 'succeeded' | 'failed'): JobReport {
    const header: JobRun = { ...this.#header, status, finished_at: this.#stamp() };
    const summarize = this.#options.summarize;
    let summary: JobSummary | null = null;
    if (summarize !== undefined) {
      const input: SummaryInput = {
        dryRun: this.#spec.dry_run,
        status,
        stages: stages.map((s) => ({ stage_id: s.stage_id, status: s.status, state: detachedState(s.state) })),
      };
      let produced: unknown;
      try {
        produced = summarize(input);
      } catch (error) {
        throw new JobEnvelopeError('invalid_summary', 'the summary hook failed', { cause: error });
      }
      summary = parseJobSummary(produced);
    }
    const report = buildReport(header, stages, summary);
    writeReport(this.#dir, report);
    writeRunHeader(this.#dir, header, header.run_id, false);
    this.#header = header;
    this.#emit('end', null);
    return report;
  }
}

function headerFor(plan: Plan, fields: CompatibilityFields, fingerprint: string, createdAt: string): JobRun {
  return {
    schema_version: JOB_SCHEMA_VERSION,
    run_id: plan.runId,
    job_id: plan.jobId,
    resumed_from: plan.resumedFrom,
    job_type: fields.job_type,
    spec_version: fields.spec_version,
    dry_run: fields.dry_run,
    input_sha256: fields.input_sha256,
    workspace_identity_sha256: fields.workspace_identity_sha256,
    stage_ids: [...fields.stage_ids],
    fingerprint,
    status: 'running',
    job_started_at: plan.jobStartedAt ?? createdAt,
    created_at: createdAt,
    finished_at: null,
  };
}

async function execute(workspace: Workspace, plan: Plan, spec: JobSpec, stages: readonly JobStage[], options: CheckedOptions): Promise<JobReport> {
  const fields = compatibilityOf(spec);
  const owned = await allocateRun(workspace, plan.runId);
  try {
    if (plan.handOver) checkHandOverLeftovers(owned.dir, plan.runId);
    const stamp = monotonicStamps(options.clock, plan.floor);
    const runner = new Runner(owned, spec, headerFor(plan, fields, resumeFingerprint(fields), stamp()), stamp, options);
    const ledger = [...plan.stages];
    stopIfAborted(options.signal);
    runner.start(ledger);
    let status: 'succeeded' | 'failed' = 'succeeded';
    for (const [index, stage] of stages.entries()) {
      const previous = ledger[index] as LedgerStage;
      if (previous.status === 'succeeded') continue;
      stopIfAborted(options.signal);
      const outcome = await runner.runStage(stage, index, previous, ledger);
      ledger[index] = outcome;
      if (outcome.status === 'failed') {
        status = 'failed';
        break;
      }
    }
    stopIfAborted(options.signal);
    return runner.finish(ledger, status);
  } finally {
    owned.release();
  }
}

/**
 * Runs a job to its end, or resumes one (`options.resume`), under this
 * workspace's lock for its job type. Returns the sanitized report of a run
 * that finished (succeeded or failed: a stage failure is data, not an
 * exception). Throws JobEnvelopeError when the job cannot run at all, or
 * when a checkpoint cannot be written (the last durable one stays, and the
 * run can be resumed from it).
 *
 * Checkpoints, each an atomic durable write: `start` (run header), then per
 * stage `before_stage` (stage record `running`) and `after_stage`
 * (`succeeded`/`failed`), then `end` (report, then terminal header). A stage
 * may add its own with `ctx.saveState`.
 */
export async function runJob<Code extends string>(
  spec: JobSpecInput | JobSpec,
  stages: readonly JobStage<Code>[],
  options: RunJobOptions,
): Promise<JobReport> {
  const parsed = parseJobSpec(spec);
  checkStages(stages, parsed.stage_ids);
  const checked = checkOptions(options);
  stopIfAborted(checked.signal);
  const fingerprint = resumeFingerprint(compatibilityOf(parsed));
  const workspace = openWorkspace(checked.workspace, checked.resume === undefined);
  try {
    // A resume proves its source before it takes the lock, so a refused resume writes nothing at all.
    if (checked.resume !== undefined) proveSource(workspace, checked.resume, fingerprint);
    const jobLock = takeJobLock(workspace, parsed.job_type);
    try {
      stopIfAborted(checked.signal);
      const plan = checked.resume === undefined ? freshPlan(workspace, parsed, checked.runId) : resumePlan(workspace, checked.resume, fingerprint);
      return await execute(workspace, plan, parsed, stages, checked);
    } finally {
      jobLock.release();
    }
  } finally {
    workspace.close();
  }
}
