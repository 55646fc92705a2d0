import { isAbsolute } from 'node:path';
import { runJob, type CheckpointEvent, type JobSummary, type SummaryInput } from '@oduflow/job-envelope';
import { isRequestId } from '@oduflow/protocol';
import { resolveDeps, type MasterDeps } from '../deps.js';
import { MasterRunnerError } from '../errors.js';
import { batchStages, type TargetSettled } from './batch-stage.js';
import { fromEnvelopeError } from './envelope-errors.js';
import { countOutcomes, type TargetRow } from './outcomes.js';
import { readRollout } from './read-rollout.js';
import type { RolloutReport } from './report.js';
import { parseRolloutSpec, rolloutJobSpec, type RolloutInput } from './spec.js';
import { RolloutStageStateSchema } from './stage-state.js';

/*
 * Starting a rollout, for the CLI and for a service alike: no process, TTY
 * or signal assumptions. startRollout resolves once the rollout's first
 * checkpoint is durable (its run id exists and `readRollout` can show it),
 * and hands back `done`, which settles when the run ends: a service answers
 * 202 with the run id and lets `done` run in the background; a CLI awaits
 * it. Progress comes as plain events (onProgress).
 */

export const DEFAULT_STAGE_TIMEOUT_MS = 15 * 60_000;
export const DEFAULT_POLL_INTERVAL_MS = 2_000;
export const DEFAULT_ROLLOUT_CONCURRENCY = 8;
export const MAX_ROLLOUT_CONCURRENCY = 64;

export type RolloutProgress =
  /** The first checkpoint is durable. */
  | {
      readonly kind: 'started';
      readonly rolloutId: string;
      readonly runId: string;
      readonly resumedFrom: string | null;
      readonly dryRun: boolean;
      readonly targetCount: number;
      readonly stageCount: number;
    }
  /** A stage (batch) begins; the targets of the stages before it are settled (`settledBefore`). */
  | { readonly kind: 'stage_started'; readonly stageId: string; readonly index: number; readonly targets: number; readonly settledBefore: number }
  /** One target reached its outcome in this stage. */
  | { readonly kind: 'target'; readonly stageId: string; readonly index: number; readonly row: TargetRow }
  | { readonly kind: 'stage_finished'; readonly stageId: string; readonly index: number; readonly status: 'succeeded' | 'failed' }
  /** The final checkpoint is durable. */
  | { readonly kind: 'finished'; readonly status: 'succeeded' | 'failed' };

export interface RolloutOptions {
  /** Absolute path of the job workspace (created 0700 for a new rollout). */
  readonly workspace: string;
  /** The run id of an interrupted or failed rollout to resume. */
  readonly resume?: string;
  /**
   * The id of a new rollout (a canonical UUID; default: a random one). A
   * service derives it from the Idempotency-Key the rollout was asked with,
   * so the key finds its rollout again. Not with `resume`; an id already used
   * in the workspace is refused (`rollout_refused`, detail invalid_argument).
   */
  readonly rolloutId?: string;
  /**
   * Aborting it stops the rollout as a crash would, with the process alive:
   * no new dispatch or poll starts, those in flight finish and are recorded,
   * no further checkpoint is written, and `done` rejects with
   * `rollout_interrupted`. The run reads `interrupted`; resume it (it
   * dispatches nothing twice: a re-entered batch finds its requests).
   */
  readonly signal?: AbortSignal;
  /** What the rollout acts on, hashed into its resume fingerprint (default: the record store's location). */
  readonly identity?: string;
  /** How long a stage polls its batch before calling what is still open `unresolved` (default 15 min). */
  readonly stageTimeoutMs?: number;
  /** Pause between poll rounds of a stage (default 2 s). */
  readonly pollIntervalMs?: number;
  /** Dispatches and polls of a stage in flight at once (default 8, at most 64). */
  readonly concurrency?: number;
  /** Progress events; an error thrown here is ignored (a display must not stop a rollout). */
  readonly onProgress?: (event: RolloutProgress) => void;
  /** The envelope's checkpoint events, after each is durable (tests kill the process here; if it throws, the run stops and can be resumed). */
  readonly onCheckpoint?: (event: CheckpointEvent) => void;
  /** The wall clock of the ledger's timestamps. */
  readonly clock?: () => Date;
}

export interface RolloutHandle {
  /** The rollout's id (its first run's id; the same across resumes). */
  readonly rolloutId: string;
  /** This run's id: what `readRollout` and a later resume take. */
  readonly runId: string;
  readonly resumedFrom: string | null;
  /** Settles when the run ends: its report (a halted rollout is a report too); rejects when a checkpoint could not be written, or with `rollout_interrupted` once `signal` aborted it. */
  readonly done: Promise<RolloutReport>;
}

function option(value: number | undefined, fallback: number, min: number, max: number, what: string): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < min || chosen > max) {
    throw new MasterRunnerError('invalid_input', `${what} must be a whole number from ${min} to ${max}`, { detail: 'invalid_rollout_option' });
  }
  return chosen;
}

/** The envelope's closed summary (report.json): counts by outcome and one item per target. */
function summarize(input: SummaryInput): JobSummary {
  const rows = input.stages.flatMap((stage) => {
    const parsed = RolloutStageStateSchema.safeParse(stage.state);
    return parsed.success ? parsed.data.targets : [];
  });
  return { counts: countOutcomes(rows), items: rows.map((row) => ({ id: row.minion_id, state: row.outcome })) };
}

/**
 * Validates the rollout (nothing is read or written when it is invalid),
 * then starts it — or resumes `options.resume`, which is first proven, read
 * only, to be a consistent checkpoint of this very rollout (same targets,
 * profile, state data digest, batch size, budget, mode and record store) —
 * and resolves once its first checkpoint is durable.
 *
 * Throws MasterRunnerError: `invalid_input` (the input or an option),
 * `rollout_refused` (detail: job_locked, run_not_found, resume_mismatch,
 * corrupt_checkpoint, run_superseded, run_finished, unsafe_workspace,
 * invalid_argument), `rollout_io`, `rollout_interrupted` (aborted before
 * the first checkpoint).
 */
export async function startRollout(deps: MasterDeps, input: RolloutInput, options: RolloutOptions): Promise<RolloutHandle> {
  const spec = parseRolloutSpec(input);
  if (typeof options?.workspace !== 'string' || !isAbsolute(options.workspace)) {
    throw new MasterRunnerError('invalid_input', 'the rollout workspace must be an absolute path', { detail: 'invalid_rollout_option' });
  }
  if (options.resume !== undefined && !isRequestId(options.resume)) {
    throw new MasterRunnerError('invalid_input', 'a rollout run id is a canonical UUID', { detail: 'invalid_request_id' });
  }
  if (options.rolloutId !== undefined && (!isRequestId(options.rolloutId) || options.resume !== undefined)) {
    throw new MasterRunnerError('invalid_input', 'a new rollout’s id is a canonical UUID, and only without resume', { detail: 'invalid_rollout_option' });
  }
  const settings = {
    stageTimeoutMs: option(options.stageTimeoutMs, DEFAULT_STAGE_TIMEOUT_MS, 1, 7 * 24 * 3_600_000, 'the stage timeout (ms)'),
    pollIntervalMs: option(options.pollIntervalMs, DEFAULT_POLL_INTERVAL_MS, 10, 3_600_000, 'the poll interval (ms)'),
    concurrency: option(options.concurrency, DEFAULT_ROLLOUT_CONCURRENCY, 1, MAX_ROLLOUT_CONCURRENCY, 'the rollout concurrency'),
  };
  const d = resolveDeps(deps);
  const identity = options.identity ?? `record-store:${d.store.location}`;
  const tell = (event: RolloutProgress): void => {
    try {
      options.onProgress?.(event);
    } catch {
      // A progress display that fails must not stop (or fail) the rollout.
    }
  };
  const stages = batchStages(d, spec, { ...settings, onTarget: (e: TargetSettled) => tell({ kind: 'target', ...e }) });

  let started: (handle: Omit<RolloutHandle, 'done'>) => void = () => undefined;
  const first = new Promise<Omit<RolloutHandle, 'done'>>((resolve) => (started = resolve));
  const onCheckpoint = (event: CheckpointEvent): void => {
    if (event.kind === 'start') {
      started({ rolloutId: event.jobId, runId: event.runId, resumedFrom: options.resume ?? null });
      tell({ kind: 'started', rolloutId: event.jobId, runId: event.runId, resumedFrom: options.resume ?? null, dryRun: spec.dryRun, targetCount: spec.targets.length, stageCount: spec.stageIds.length });
    } else if (event.kind === 'before_stage' && event.stage !== null) {
      const { id, index } = event.stage;
      tell({ kind: 'stage_started', stageId: id, index, targets: spec.batches[index]?.length ?? 0, settledBefore: index * spec.batchSize });
    } else if (event.kind === 'after_stage' && event.stage !== null) {
      const { id, index, status } = event.stage;
      tell({ kind: 'stage_finished', stageId: id, index, status: status === 'succeeded' ? 'succeeded' : 'failed' });
    } else if (event.kind === 'end') {
      tell({ kind: 'finished', status: event.runStatus === 'succeeded' ? 'succeeded' : 'failed' });
    }
    options.onCheckpoint?.(event);
  };

  const run = runJob(rolloutJobSpec(spec, identity), stages, {
    workspace: options.workspace,
    ...(options.resume === undefined ? {} : { resume: options.resume }),
    ...(options.rolloutId === undefined ? {} : { runId: options.rolloutId }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    summarize,
    onCheckpoint,
    ...(options.clock === undefined ? {} : { clock: options.clock }),
  });
  const done = run.then(
    (report) => readRollout(options.workspace, report.run_id),
    (error: unknown) => {
      throw fromEnvelopeError(error);
    },
  );
  // Whoever awaits `done` still sees its rejection; this only keeps an unobserved one from crashing a service.
  done.catch(() => undefined);
  const handle = await Promise.race([first, done.then(() => undefined)]);
  if (handle === undefined) {
    // The run ended without its start checkpoint: impossible (runJob writes it first), but never hand back a run id nobody saw.
    throw new MasterRunnerError('internal', 'the rollout ended before its first checkpoint');
  }
  return { ...handle, done };
}

/** Runs a rollout (or resumes one) to its end and returns its report. */
export async function runRollout(deps: MasterDeps, input: RolloutInput, options: RolloutOptions): Promise<RolloutReport> {
  return (await startRollout(deps, input, options)).done;
}
