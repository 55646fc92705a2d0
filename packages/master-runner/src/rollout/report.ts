import { JOB_RUN_STATUSES, STAGE_STATUSES, type JobRunView } from '@oduflow/job-envelope';
import { PROFILES, isRequestId } from '@oduflow/protocol';
import { z } from 'zod';
import { MasterRunnerError } from '../errors.js';
import { PENDING, REASON_PATTERN, ROLLOUT_OUTCOMES, type TargetRow } from './outcomes.js';
import { TargetRowSchema, parseStageState, type RolloutStageState } from './stage-state.js';

/*
 * The rollout report: fixed fields only — ids, codes, counts, timestamps —
 * built from the job's ledger (the same for a finished run, a running one
 * and `show`), then parsed with a strict schema before it leaves, so nothing
 * outside those fields can be in it: no path, no exception message, no
 * state data, no credential. A stage that threw is `stage_exception`, the
 * envelope's fixed code; its error was never read.
 */

/** Every count key of a report: each outcome, targets still pending in a stage, and targets of stages not reached. */
export const ROLLOUT_COUNT_KEYS = [...ROLLOUT_OUTCOMES, PENDING, 'not_reached'] as const;
export type RolloutCountKey = (typeof ROLLOUT_COUNT_KEYS)[number];

const Count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Id = z.string().refine(isRequestId);
const Instant = z.iso.datetime();

const CountsSchema = z.strictObject(Object.fromEntries(ROLLOUT_COUNT_KEYS.map((key) => [key, Count])) as Record<RolloutCountKey, typeof Count>);

const RolloutReportStageSchema = z.strictObject({
  stage_id: z.string().regex(/^batch-[0-9]{5}$/),
  status: z.enum(STAGE_STATUSES),
  started_at: Instant.nullable(),
  finished_at: Instant.nullable(),
  duration_ms: Count.nullable(),
  /** The closed code of a failed stage: `budget_exceeded`, or `stage_exception` for anything that threw. */
  error: z.string().regex(REASON_PATTERN).nullable(),
  /** How many targets the stage has (null before it was reached). */
  targets: Count.nullable(),
});

export const RolloutReportSchema = z.strictObject({
  schema_version: z.literal(1),
  /** The rollout's id: its first run's id, shared by every run that resumes it. */
  rollout_id: Id,
  run_id: Id,
  resumed_from: Id.nullable(),
  superseded_by: Id.nullable(),
  dry_run: z.boolean(),
  status: z.enum(JOB_RUN_STATUSES),
  /** Why a failed rollout stopped: the failed stage's code. */
  halted: z.string().regex(REASON_PATTERN).nullable(),
  profile: z.enum(PROFILES).nullable(),
  target_count: Count.nullable(),
  batch_size: Count.nullable(),
  max_unresolved: Count.nullable(),
  /** Failed + unresolved outcomes so far, over the settled batches. */
  budget_used: Count,
  started_at: Instant,
  finished_at: Instant.nullable(),
  duration_ms: Count.nullable(),
  counts: CountsSchema,
  stages: z.array(RolloutReportStageSchema),
  targets: z.array(TargetRowSchema),
});
export type RolloutReport = z.infer<typeof RolloutReportSchema>;
export type RolloutReportStage = z.infer<typeof RolloutReportStageSchema>;

function millis(from: string | null, to: string | null): number | null {
  return from === null || to === null ? null : Math.max(0, Date.parse(to) - Date.parse(from));
}

/** The report of a rollout run as its ledger says, validated field by field. */
export function buildRolloutReport(view: JobRunView): RolloutReport {
  const { run } = view;
  const states: (RolloutStageState | null)[] = view.stages.map((stage) => (stage.state === null ? null : parseStageState(stage.state, stage.stage_id)));
  const first = states.find((s): s is RolloutStageState => s !== null);
  const targets: TargetRow[] = states.flatMap((s) => (s === null ? [] : s.targets));
  const counts = Object.fromEntries(ROLLOUT_COUNT_KEYS.map((key) => [key, 0])) as Record<RolloutCountKey, number>;
  for (const row of targets) counts[row.outcome] += 1;
  counts.not_reached = first === undefined ? 0 : Math.max(0, first.target_count - targets.length);
  const settled = states.filter((s): s is RolloutStageState => s !== null && s.budget_used !== null);
  const failedStage = view.stages.find((stage) => stage.status === 'failed');
  const report = {
    schema_version: 1,
    rollout_id: run.job_id,
    run_id: run.run_id,
    resumed_from: run.resumed_from,
    superseded_by: view.supersededBy,
    dry_run: run.dry_run,
    status: view.status,
    halted: run.status === 'failed' ? (failedStage?.error?.code ?? null) : null,
    profile: first?.profile ?? null,
    target_count: first?.target_count ?? null,
    batch_size: first?.batch_size ?? null,
    max_unresolved: first?.max_unresolved ?? null,
    budget_used: settled.reduce((most, s) => Math.max(most, s.budget_used ?? 0), 0),
    started_at: run.job_started_at,
    finished_at: run.finished_at,
    duration_ms: millis(run.job_started_at, run.finished_at),
    counts,
    stages: view.stages.map((stage, index) => ({
      stage_id: stage.stage_id,
      status: stage.status,
      started_at: stage.started_at,
      finished_at: stage.finished_at,
      duration_ms: millis(stage.started_at, stage.finished_at),
      error: stage.error?.code ?? null,
      targets: states[index]?.targets.length ?? null,
    })),
    targets,
  };
  const parsed = RolloutReportSchema.safeParse(report);
  if (!parsed.success) {
    throw new MasterRunnerError('rollout_refused', `run ${run.run_id} does not make a rollout report`, { detail: 'corrupt_checkpoint' });
  }
  return parsed.data;
}
