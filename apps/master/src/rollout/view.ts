import { stageIdOf, type RolloutListing, type RolloutReport } from '@oduflow/master-runner';
import type { Report, Row } from '../output.js';

/*
 * What the CLI shows of a rollout: the library's fixed-field report. With
 * --json it is printed as is; the table shows the same fields: the rollout,
 * its counts (those that are not zero), its stages and one row per target.
 */

function countsText(counts: RolloutReport['counts']): string {
  const parts = Object.entries(counts).filter(([, n]) => n > 0);
  return parts.length === 0 ? '-' : parts.map(([key, n]) => `${key} ${n}`).join(', ');
}

function title(report: RolloutReport): string {
  const what = report.dry_run ? 'rollout (dry run)' : 'rollout';
  if (report.status === 'failed') return `${what}: halted (${report.halted ?? 'failed'})`;
  return `${what}: ${report.status}`;
}

export function rolloutView(report: RolloutReport): Report {
  const summary: Row = {
    rollout_id: report.rollout_id,
    run_id: report.run_id,
    resumed_from: report.resumed_from,
    superseded_by: report.superseded_by,
    status: report.status,
    halted: report.halted,
    dry_run: report.dry_run,
    profile: report.profile,
    targets: report.target_count,
    batch_size: report.batch_size,
    budget: report.max_unresolved === null ? null : `${report.budget_used} used of ${report.max_unresolved}`,
    counts: countsText(report.counts),
    stages: `${report.stages.filter((s) => s.status === 'succeeded').length} of ${report.stages.length} succeeded`,
    started_at: report.started_at,
    finished_at: report.finished_at,
    duration_ms: report.duration_ms,
  };
  // Targets come batch by batch, in stage order, and only reached stages have targets: position i is in batch i / batch_size.
  const rows: Row[] = report.targets.map((t, i) => ({
    stage: stageIdOf(Math.floor(i / (report.batch_size ?? 1))),
    minion_id: t.minion_id,
    request_id: t.request_id,
    outcome: t.outcome,
    state: t.record_state,
    reason: t.reason,
    detail: t.detail,
    blocked_by: t.blocked_by,
    passed: t.passed,
    total: t.total,
  }));
  return { title: title(report), summary, rows, document: report };
}

export function listingView(listings: readonly RolloutListing[]): Report {
  const rows: Row[] = listings.map((l) =>
    l.valid
      ? {
          run_id: l.run_id,
          rollout_id: l.rollout_id,
          status: l.status,
          dry_run: l.dry_run,
          stages: `${l.stages_succeeded}/${l.stages}${l.stages_failed > 0 ? ` (${l.stages_failed} failed)` : ''}`,
          created_at: l.created_at,
          finished_at: l.finished_at,
          resumed_from: l.resumed_from,
          superseded_by: l.superseded_by,
          unreadable: null,
        }
      : { run_id: l.run_id, rollout_id: null, status: null, dry_run: null, stages: null, created_at: null, finished_at: null, resumed_from: null, superseded_by: null, unreadable: l.code },
  );
  return { title: `rollouts: ${rows.length} run(s)`, rows, document: { rollouts: listings } };
}
