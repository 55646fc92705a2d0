import { JobEnvelopeError, listJobs, readJob, type JobRunStatus } from '@oduflow/job-envelope';
import { MasterRunnerError } from '../errors.js';
import { viaEnvelope } from './envelope-errors.js';
import { buildRolloutReport, type RolloutReport } from './report.js';
import { ROLLOUT_JOB_TYPE } from './spec.js';

/*
 * Reading rollouts, past or running, without taking any lock for writing:
 * the envelope proves the run's ledger consistent (as a resume would) and
 * the report is built from it. A running rollout shows the batches it has
 * reached, with the targets still being polled as `pending`.
 */

/** The report of one rollout run as its checkpoints say now. */
export function readRollout(workspace: string, runId: string): RolloutReport {
  const view = viaEnvelope(() => readJob(workspace, runId));
  if (view.run.job_type !== ROLLOUT_JOB_TYPE) {
    throw new MasterRunnerError('rollout_refused', `run ${runId} is not a rollout`, { detail: 'run_not_found' });
  }
  return buildRolloutReport(view);
}

/** One line of listRollouts: a run, or the code that says why it cannot be read. */
export type RolloutListing =
  | {
      readonly run_id: string;
      readonly valid: true;
      readonly rollout_id: string;
      readonly status: JobRunStatus;
      readonly dry_run: boolean;
      readonly created_at: string;
      readonly finished_at: string | null;
      readonly resumed_from: string | null;
      readonly superseded_by: string | null;
      readonly stages: number;
      readonly stages_succeeded: number;
      readonly stages_failed: number;
    }
  | { readonly run_id: string; readonly valid: false; readonly code: JobEnvelopeError['code'] };

/** Every rollout run of the workspace, oldest first; none when the workspace does not exist yet. */
export function listRollouts(workspace: string): RolloutListing[] {
  let listings;
  try {
    listings = listJobs(workspace, { jobType: ROLLOUT_JOB_TYPE });
  } catch (error) {
    if (JobEnvelopeError.isInstance(error) && error.code === 'run_not_found') return [];
    return viaEnvelope(() => {
      throw error;
    });
  }
  return listings.map((listing): RolloutListing => {
    if (!listing.valid) return { run_id: listing.runId, valid: false, code: listing.code };
    const { stages } = listing;
    return {
      run_id: listing.runId,
      valid: true,
      rollout_id: listing.jobId,
      status: listing.status,
      dry_run: listing.dryRun,
      created_at: listing.createdAt,
      finished_at: listing.finishedAt,
      resumed_from: listing.resumedFrom,
      superseded_by: listing.supersededBy,
      stages: stages.pending + stages.running + stages.succeeded + stages.failed,
      stages_succeeded: stages.succeeded,
      stages_failed: stages.failed,
    };
  });
}
