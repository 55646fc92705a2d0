import { isRequestId } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { JobEnvelopeError, store } from './errors.js';
import type { JobRun, LedgerStage, StageStatus } from './ledger.js';
import { JOB_TYPE_PATTERN } from './limits.js';
import { type JobReport, JobReportSchema } from './report.js';
import { schemaFailure } from './schema-failure.js';
import { HEADER_FILE, REPORT_FILE, type Workspace, isRunLive, loadRun, openRunDir, openWorkspace } from './workspace.js';

/** A run's status as a reader sees it: a stored `running` whose runner is gone reads as `interrupted`. */
export const JOB_RUN_STATUSES = ['running', 'interrupted', 'succeeded', 'failed'] as const;
export type JobRunStatus = (typeof JOB_RUN_STATUSES)[number];

/** One run, proven consistent, for `show`. */
export interface JobRunView {
  /** The validated run header. */
  readonly run: JobRun;
  readonly status: JobRunStatus;
  /** The run that resumed this one, if any. */
  readonly supersededBy: string | null;
  /** Every stage in order, pending ones included, with its saved state. */
  readonly stages: readonly LedgerStage[];
  /** The report of a finished run; null while it has not finished. */
  readonly report: JobReport | null;
}

/** One line of listJobs: a run that could be read, or the code that says why not. */
export type JobListing =
  | {
      readonly runId: string;
      readonly valid: true;
      readonly jobId: string;
      readonly jobType: string;
      readonly dryRun: boolean;
      readonly status: JobRunStatus;
      readonly createdAt: string;
      readonly finishedAt: string | null;
      readonly resumedFrom: string | null;
      readonly supersededBy: string | null;
      readonly stages: Readonly<Record<StageStatus, number>>;
    }
  | { readonly runId: string; readonly valid: false; readonly code: JobEnvelopeError['code'] };

function checkWorkspacePath(workspace: unknown): asserts workspace is string {
  if (typeof workspace !== 'string' || !workspace.startsWith('/')) {
    throw new JobEnvelopeError('invalid_argument', 'the workspace must be an absolute path');
  }
}

function checkRunId(runId: unknown): asserts runId is string {
  if (!isRequestId(runId)) throw new JobEnvelopeError('invalid_argument', 'a run id must be a canonical UUID');
}

/** The stored report must be the report of exactly this ledger. */
function readReport(dir: PrivateDir, run: JobRun, stages: readonly LedgerStage[]): JobReport {
  const stored = store(`the report of run ${run.run_id}`, () => dir.readJsonIfExists(REPORT_FILE));
  if (stored === undefined) throw new JobEnvelopeError('corrupt_checkpoint', `run ${run.run_id} finished but its report is missing`);
  const parsed = JobReportSchema.safeParse(stored);
  if (!parsed.success) throw schemaFailure('corrupt_checkpoint', `the report of run ${run.run_id}`, parsed.error);
  const report = parsed.data;
  const matches =
    report.run_id === run.run_id &&
    report.job_id === run.job_id &&
    report.resumed_from === run.resumed_from &&
    report.job_type === run.job_type &&
    report.dry_run === run.dry_run &&
    report.status === run.status &&
    report.started_at === run.job_started_at &&
    report.finished_at === run.finished_at &&
    report.stages.length === stages.length &&
    report.stages.every((entry, index) => entry.stage_id === stages[index]?.stage_id && entry.status === stages[index].status);
  if (!matches) throw new JobEnvelopeError('corrupt_checkpoint', `the report of run ${run.run_id} does not match its ledger`);
  return report;
}

function viewOf(workspace: Workspace, runId: string, withReport: boolean): JobRunView {
  const dir = openRunDir(workspace, runId);
  try {
    // Liveness first: a runner that ends between the probe and the reads has written a terminal header by then.
    const live = loadAndProbe(dir, runId);
    const { ledger, superseded } = live.loaded;
    const { run, stages } = ledger;
    const status: JobRunStatus = run.status === 'running' ? (live.live ? 'running' : 'interrupted') : run.status;
    const report = withReport && run.status !== 'running' ? readReport(dir, run, stages) : null;
    return { run, status, supersededBy: superseded?.successor ?? null, stages, report };
  } finally {
    dir.close();
  }
}

function loadAndProbe(dir: PrivateDir, runId: string): { live: boolean; loaded: ReturnType<typeof loadRun> } {
  // A directory without a committed header is no run: refused before any lock file is touched.
  if (!store(`run ${runId}`, () => dir.list()).includes(HEADER_FILE)) {
    throw new JobEnvelopeError('run_not_found', `run ${runId} has no committed checkpoint`);
  }
  const live = isRunLive(dir, runId);
  return { live, loaded: loadRun(dir, runId) };
}

/**
 * Reads one run and proves it consistent (the same checks as a resume),
 * with its report when it has finished. Read-only, except that probing the
 * run lock recreates `run.lock` if someone deleted it.
 */
export function readJob(workspace: string, runId: string): JobRunView {
  checkWorkspacePath(workspace);
  checkRunId(runId);
  const opened = openWorkspace(workspace, false);
  try {
    return viewOf(opened, runId, true);
  } finally {
    opened.close();
  }
}

function countStages(stages: readonly LedgerStage[]): Record<StageStatus, number> {
  const counts: Record<StageStatus, number> = { pending: 0, running: 0, succeeded: 0, failed: 0 };
  for (const stage of stages) counts[stage.status] += 1;
  return counts;
}

/**
 * Lists the runs of a workspace (optionally of one job type), oldest first.
 * A run that fails validation is listed with its error code instead of
 * hiding the others; a directory without a committed header (a run whose
 * first checkpoint never landed) is not a run and is left out.
 */
export function listJobs(workspace: string, options: { readonly jobType?: string } = {}): JobListing[] {
  checkWorkspacePath(workspace);
  if (options.jobType !== undefined && (typeof options.jobType !== 'string' || !JOB_TYPE_PATTERN.test(options.jobType))) {
    throw new JobEnvelopeError('invalid_argument', 'a job type is a short lowercase name');
  }
  const opened = openWorkspace(workspace, false);
  try {
    const listings: JobListing[] = [];
    for (const runId of store('the runs directory', () => opened.runs.list())) {
      if (!isRequestId(runId)) continue;
      try {
        const view = viewOf(opened, runId, false);
        if (options.jobType !== undefined && view.run.job_type !== options.jobType) continue;
        listings.push({
          runId,
          valid: true,
          jobId: view.run.job_id,
          jobType: view.run.job_type,
          dryRun: view.run.dry_run,
          status: view.status,
          createdAt: view.run.created_at,
          finishedAt: view.run.finished_at,
          resumedFrom: view.run.resumed_from,
          supersededBy: view.supersededBy,
          stages: countStages(view.stages),
        });
      } catch (error) {
        if (!JobEnvelopeError.isInstance(error)) throw error;
        if (error.code === 'run_not_found') continue;
        listings.push({ runId, valid: false, code: error.code });
      }
    }
    // Valid runs by creation time, then the unreadable ones; ties by run id. Plain code-unit order, not locale order.
    const key = (listing: JobListing): string => `${listing.valid ? `0${listing.createdAt}` : '1'} ${listing.runId}`;
    return listings.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  } finally {
    opened.close();
  }
}
