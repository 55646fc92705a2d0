import { MasterRunnerError, listRollouts, readRollout, type RolloutReport } from '@oduflow/master-runner';

/*
 * Rollouts as the dashboard shows them, read from the rollout workspace
 * with the library (read-only: no lock is taken, a running rollout is read
 * as its checkpoints say now). A rollout belongs to no tenant of its own: a
 * tenant sees one when every target it has reached is one of the tenant's
 * (and it has reached at least one), so no tenant learns of another's
 * targets; a rollout that has not checkpointed its first batch yet is shown
 * to nobody.
 */

interface RolloutSummary {
  readonly run_id: string;
  readonly rollout_id: string;
  readonly status: RolloutReport['status'];
  readonly dry_run: boolean;
  readonly profile: RolloutReport['profile'];
  readonly target_count: number | null;
  readonly budget_used: number;
  readonly max_unresolved: number | null;
  readonly stages: number;
  readonly stages_settled: number;
  readonly started_at: string;
  readonly finished_at: string | null;
  readonly superseded_by: string | null;
}

/** At most this many rollouts are listed (the newest). */
const MAX_LISTED_ROLLOUTS = 50;

export function visibleTo(report: RolloutReport, tenant: string, ownerOf: (minionId: string) => string | undefined): boolean {
  return report.targets.length > 0 && report.targets.every((row) => ownerOf(row.minion_id) === tenant);
}

function summaryOf(report: RolloutReport): RolloutSummary {
  return {
    run_id: report.run_id,
    rollout_id: report.rollout_id,
    status: report.status,
    dry_run: report.dry_run,
    profile: report.profile,
    target_count: report.target_count,
    budget_used: report.budget_used,
    max_unresolved: report.max_unresolved,
    stages: report.stages.length,
    stages_settled: report.stages.filter((s) => s.status === 'succeeded' || s.status === 'failed').length,
    started_at: report.started_at,
    finished_at: report.finished_at,
    superseded_by: report.superseded_by,
  };
}

/** The report of one run, or undefined when there is no such rollout run (or no workspace yet). */
export function readRolloutIfAny(workspace: string, runId: string): RolloutReport | undefined {
  try {
    return readRollout(workspace, runId);
  } catch (error) {
    if (MasterRunnerError.isInstance(error) && error.code === 'rollout_refused' && error.detail === 'run_not_found') return undefined;
    throw error;
  }
}

export interface RolloutList {
  readonly items: readonly RolloutSummary[];
  /** Runs that could not be read (a corrupt checkpoint): how many, never which of another tenant. */
  readonly unreadable: number;
}

/** The tenant's rollouts, newest first. */
export function listVisibleRollouts(workspace: string, tenant: string, ownerOf: (minionId: string) => string | undefined): RolloutList {
  const listings = listRollouts(workspace);
  const items: RolloutSummary[] = [];
  let unreadable = 0;
  for (const listing of listings.reverse()) {
    if (items.length >= MAX_LISTED_ROLLOUTS) break;
    if (!listing.valid) {
      unreadable += 1;
      continue;
    }
    let report: RolloutReport | undefined;
    try {
      report = readRolloutIfAny(workspace, listing.run_id);
    } catch {
      unreadable += 1;
      continue;
    }
    if (report !== undefined && visibleTo(report, tenant, ownerOf)) items.push(summaryOf(report));
  }
  return { items, unreadable };
}
