import { MasterRunnerError, listRollouts, readRollout, type RolloutReport } from '@oduflow/master-runner';
import { join } from 'node:path';
import type { RolloutService } from '../rollout-service.js';
import type { WatchedRollout } from './rollout-watch.js';

/*
 * Rollouts as the dashboard shows them, two kinds, both read-only (no lock
 * is taken; a running rollout is read as its checkpoints say now):
 *   - `http`: asked for over POST /v1/rollouts and run by the service. They
 *     belong to the tenant that asked; the rollout service reads them (by
 *     rollout id, its latest run).
 *   - `cli`: run by `oduflow-master rollout` in the same workspace, read
 *     with the library by run id. Such a rollout belongs to no tenant: a
 *     tenant sees one when every target it has reached is one of the
 *     tenant's (and it has reached at least one), so no tenant learns of
 *     another's targets; one that has not checkpointed its first batch yet
 *     is shown to nobody.
 */

type RolloutSource = 'http' | 'cli';

interface RolloutSummary {
  /** What its page is addressed by: the rollout id (http) or the run id (cli). */
  readonly id: string;
  readonly source: RolloutSource;
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

function visibleTo(report: RolloutReport, tenant: string, ownerOf: (minionId: string) => string | undefined): boolean {
  return report.targets.length > 0 && report.targets.every((row) => ownerOf(row.minion_id) === tenant);
}

function summaryOf(report: RolloutReport, source: RolloutSource): RolloutSummary {
  return {
    id: source === 'http' ? report.rollout_id : report.run_id,
    source,
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
function readRolloutIfAny(workspace: string, runId: string): RolloutReport | undefined {
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

/** The tenant's rollouts: those it asked the service for, then the CLI's it may see, each newest first. */
export async function listVisibleRollouts(
  service: RolloutService,
  workspace: string | undefined,
  tenant: string,
  ownerOf: (minionId: string) => string | undefined,
): Promise<RolloutList> {
  const items: RolloutSummary[] = [];
  let unreadable = 0;
  if (service.enabled) {
    const page = await service.list(tenant, { limit: MAX_LISTED_ROLLOUTS });
    for (const item of page.items) {
      const report = item.status === 'unreadable' ? undefined : await service.get(tenant, item.rollout_id);
      if (report === undefined) unreadable += 1;
      else items.push(summaryOf(report, 'http'));
    }
  }
  if (workspace !== undefined) {
    for (const listing of listRollouts(workspace).reverse()) {
      if (items.length >= 2 * MAX_LISTED_ROLLOUTS) break;
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
      if (report !== undefined && visibleTo(report, tenant, ownerOf)) items.push(summaryOf(report, 'cli'));
    }
  }
  items.sort((a, b) => b.started_at.localeCompare(a.started_at));
  return { items, unreadable };
}

export interface FoundRollout {
  readonly source: RolloutSource;
  readonly report: RolloutReport;
  /** The key and reader a live watch of it uses. */
  readonly key: string;
  readonly watch: WatchedRollout;
  /** Whether a later report may still be shown to the tenant. */
  readonly stillVisible: (report: RolloutReport) => boolean;
}

/** The tenant's rollout `id`: one it asked the service for (by rollout id), else a CLI run it may see (by run id). */
export async function findRollout(
  service: RolloutService,
  workspace: string | undefined,
  tenant: string,
  id: string,
  ownerOf: (minionId: string) => string | undefined,
): Promise<FoundRollout | undefined> {
  if (service.enabled) {
    const report = await service.get(tenant, id);
    if (report !== undefined) {
      return { source: 'http', report, key: `http/${tenant}/${id}`, watch: { read: () => service.get(tenant, id) }, stillVisible: () => true };
    }
  }
  if (workspace === undefined) return undefined;
  const report = readRolloutIfAny(workspace, id);
  if (report === undefined || !visibleTo(report, tenant, ownerOf)) return undefined;
  return {
    source: 'cli',
    report,
    key: `cli/${id}`,
    watch: { read: () => readRolloutIfAny(workspace, id), dir: join(workspace, 'runs', id) },
    stillVisible: (later) => visibleTo(later, tenant, ownerOf),
  };
}
