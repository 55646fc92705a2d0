import type { JsonValue } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { JobEnvelopeError } from './errors.js';
import { CODE_PATTERN } from './limits.js';

/**
 * How a stage is being entered:
 * - `first`: it never ran in this job; its state is null.
 * - `after_interruption`: a runner died while it was running (it was found
 *   `running` in the checkpoint). Some of its work may have happened; its
 *   state is the last one it saved.
 * - `after_failure`: it failed in the run being resumed; its state is the
 *   last one it saved.
 */
export type StageEntry = 'first' | 'after_interruption' | 'after_failure';

/** What a stage gets while it runs. */
export interface StageContext<Code extends string = string> {
  /** The id of the job's first run: the same in every run that resumes it (derive stable ids from it). */
  readonly jobId: string;
  readonly runId: string;
  readonly stageId: string;
  readonly stageIndex: number;
  readonly dryRun: boolean;
  readonly entry: StageEntry;
  /** How many times this stage has been entered in this job, this time included (1 on a first entry). */
  readonly attempt: number;
  /** The run directory's path, for messages. Stages write files only through `scratch()`. */
  readonly runDir: string;
  /** The last state this stage saved (in this run or the one resumed), a detached copy; null if none. */
  readonly state: JsonValue | null;
  /**
   * Durably replaces this stage's state: canonical JSON, at most
   * MAX_STAGE_STATE_BYTES, written atomically (fsync, rename, fsync of the
   * directory) before it returns. `invalid_stage_state` otherwise. A resume
   * hands it back to the stage. Only valid while the stage runs.
   */
  saveState(state: JsonValue | null): void;
  /**
   * The state an earlier stage of this job saved (a detached copy; null if it
   * saved none). Every earlier stage has succeeded, in this run or in the one
   * resumed, so a stage can carry a running total forward (a rollout's error
   * budget) by reading only its predecessor. `invalid_argument` for a stage id
   * that is not before this one.
   */
  earlierState(stageId: string): JsonValue | null;
  /** Ends the stage as failed with one of its declared `failureCodes`; the job stops there. */
  fail(code: Code): never;
  /** Opens a private 0700 directory of this run for the stage's own files (not carried over by a resume); close it when done. */
  scratch(): PrivateDir;
  /**
   * Aborted when the runner's caller aborts the run (`options.signal`; never,
   * without one). A stage should then stop starting new work, let the work
   * in hand settle, and return or throw: its outcome is not recorded (the
   * stage stays `running`, as after a crash) and a resume re-enters it.
   */
  readonly signal: AbortSignal;
}

/** One stage of a job: an id from the spec's `stage_ids`, in the same order, and what it does. */
export interface JobStage<Code extends string = string> {
  readonly id: string;
  /** The failure codes this stage may report with `ctx.fail` (short lowercase codes); they appear in reports. */
  readonly failureCodes?: readonly Code[];
  run(ctx: StageContext<Code>): void | Promise<void>;
}

const FAILURE_MARKER = Symbol('oduflow.job-envelope.stage-failure');

/** Thrown by ctx.fail; recognised only by this module's own symbol, never by name or message. */
export class DeclaredStageFailure extends Error {
  readonly [FAILURE_MARKER] = true;
  readonly failureCode: string;

  constructor(code: string) {
    super('stage reported failure');
    this.failureCode = code;
  }

  static codeOf(error: unknown): string | undefined {
    if (typeof error !== 'object' || error === null) return undefined;
    const record = error as Record<symbol, unknown> & { failureCode?: unknown };
    return record[FAILURE_MARKER] === true && typeof record.failureCode === 'string' ? record.failureCode : undefined;
  }
}

/** Checks the stages against the spec's stage ids, and their declared failure codes. */
export function checkStages(stages: readonly JobStage[], stageIds: readonly string[]): void {
  // A caller in plain JavaScript may pass anything: each stage is checked as an unknown value.
  const given: unknown = stages;
  if (!Array.isArray(given) || given.length !== stageIds.length) {
    throw new JobEnvelopeError('invalid_spec', `the job has ${stageIds.length} stage ids but was given a different number of stages`);
  }
  given.forEach((stage: unknown, index: number) => {
    if (typeof stage !== 'object' || stage === null || !('run' in stage) || typeof stage.run !== 'function') {
      throw new JobEnvelopeError('invalid_spec', `stage ${index} has no run function`);
    }
    if (!('id' in stage) || stage.id !== stageIds[index]) {
      throw new JobEnvelopeError('invalid_spec', `stage ${index} is not the stage the spec lists at that position`);
    }
    const codes: unknown = 'failureCodes' in stage ? (stage.failureCodes ?? []) : [];
    if (!Array.isArray(codes) || !codes.every((code) => typeof code === 'string' && CODE_PATTERN.test(code))) {
      throw new JobEnvelopeError('invalid_spec', `stage ${index} declares a failure code that is not a short lowercase code`);
    }
  });
}
