import { type CheckpointKind, type RunJobOptions, runJob } from '../../src/run-job.js';
import type { JobSpecInput } from '../../src/spec.js';
import type { JobStage } from '../../src/stage.js';

/** Thrown from onCheckpoint to stop a run in this process exactly after a checkpoint became durable. */
class Interrupted extends Error {
  constructor(readonly runId: string) {
    super('interrupted by the test');
  }
}

/**
 * Runs a job and stops it right after the checkpoint `kind` (of stage
 * `stageIndex`, for the stage kinds). What is left on disk is what a crash
 * there leaves; the locks are released as the process lives on. Resolves
 * with the run id. The crash tests do the same with a real SIGKILL.
 */
export async function interruptAt(
  spec: JobSpecInput,
  stages: readonly JobStage[],
  options: RunJobOptions,
  kind: CheckpointKind,
  stageIndex?: number,
): Promise<string> {
  try {
    await runJob(spec, stages, {
      ...options,
      onCheckpoint: (event) => {
        if (event.kind === kind && (stageIndex === undefined || event.stage?.index === stageIndex)) throw new Interrupted(event.runId);
      },
    });
  } catch (error) {
    if (error instanceof Interrupted) return error.runId;
    throw error;
  }
  throw new Error(`the run never reached the checkpoint ${kind}`);
}
