import { z } from 'zod';
import { JobEnvelopeError } from './errors.js';
import { type JobRun, type LedgerStage, RunIdSchema, STAGE_STATUSES, StageErrorSchema } from './ledger.js';
import { CODE_PATTERN, ITEM_ID_PATTERN, JOB_SCHEMA_VERSION, JOB_TYPE_PATTERN, MAX_STAGES, MAX_SUMMARY_COUNTS, MAX_SUMMARY_ITEMS, STAGE_ID_PATTERN } from './limits.js';
import { schemaFailure } from './schema-failure.js';
import { UtcTimestampSchema, millisBetween } from './time.js';

const Count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Duration = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/**
 * What a job may add to its report, closed by construction: counts keyed by
 * short codes, and one row per item (for a rollout: per target) with a code
 * for its final state. Identifiers and codes only — no free text can pass,
 * so no message, path, state data or credential can reach a report.
 */
export const JobSummarySchema = z.strictObject({
  counts: z
    .record(z.string().regex(CODE_PATTERN), Count)
    .refine((counts) => Object.keys(counts).length <= MAX_SUMMARY_COUNTS, { message: 'too many count keys' }),
  items: z
    .array(z.strictObject({ id: z.string().regex(ITEM_ID_PATTERN), state: z.string().regex(CODE_PATTERN) }))
    .max(MAX_SUMMARY_ITEMS)
    .refine((items) => new Set(items.map((item) => item.id)).size === items.length, { message: 'item ids must be unique' }),
});
export type JobSummary = z.infer<typeof JobSummarySchema>;

/** One stage in a report: its outcome and timing, and the sanitized error of a failed stage. Never its state. */
export const ReportStageSchema = z.strictObject({
  stage_id: z.string().regex(STAGE_ID_PATTERN),
  status: z.enum(STAGE_STATUSES),
  started_at: UtcTimestampSchema.nullable(),
  finished_at: UtcTimestampSchema.nullable(),
  duration_ms: Duration.nullable(),
  error: StageErrorSchema.nullable(),
});
export type ReportStage = z.infer<typeof ReportStageSchema>;

/**
 * The fixed-field report of a finished run (`report.json`, and what runJob
 * returns). It holds ids, the mode, outcomes, timings, sanitized errors and
 * the closed summary — never paths, stage return values or state,
 * exception messages or class names, inputs or credentials.
 */
export const JobReportSchema = z.strictObject({
  schema_version: z.literal(JOB_SCHEMA_VERSION),
  job_type: z.string().regex(JOB_TYPE_PATTERN),
  job_id: RunIdSchema,
  run_id: RunIdSchema,
  resumed_from: RunIdSchema.nullable(),
  dry_run: z.boolean(),
  status: z.enum(['succeeded', 'failed']),
  /** When the job's first run started (a resumed job's report covers the whole job). */
  started_at: UtcTimestampSchema,
  finished_at: UtcTimestampSchema,
  duration_ms: Duration,
  stages: z.array(ReportStageSchema).min(1).max(MAX_STAGES),
  summary: JobSummarySchema.nullable(),
});
export type JobReport = z.infer<typeof JobReportSchema>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function hasOnlyKeys(value: Record<string, unknown>, first: string, second: string): boolean {
  const keys = Object.keys(value);
  return keys.length === 2 && keys.includes(first) && keys.includes(second);
}

/**
 * A copy of a summary that plainly fits JobSummarySchema (plain objects and
 * arrays, every field read once into the copy, then checked), or undefined
 * for anything else, which the schema then judges and names. It accepts
 * nothing the schema refuses; it saves running zod over one row per target
 * (10 000 rows in a rollout) at every end checkpoint.
 */
function plainSummary(value: unknown): JobSummary | undefined {
  if (!isRecord(value) || !hasOnlyKeys(value, 'counts', 'items')) return undefined;
  const { counts: givenCounts, items: givenItems } = value;
  if (!isRecord(givenCounts) || !Array.isArray(givenItems) || givenItems.length > MAX_SUMMARY_ITEMS) return undefined;
  const countEntries = Object.entries(givenCounts);
  if (countEntries.length > MAX_SUMMARY_COUNTS) return undefined;
  const counts: Record<string, number> = {};
  for (const [key, count] of countEntries) {
    if (!CODE_PATTERN.test(key) || typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) return undefined;
    counts[key] = count;
  }
  const items: { id: string; state: string }[] = [];
  const ids = new Set<string>();
  for (const item of givenItems as unknown[]) {
    if (!isRecord(item) || !hasOnlyKeys(item, 'id', 'state')) return undefined;
    const { id, state } = item;
    if (typeof id !== 'string' || typeof state !== 'string' || !ITEM_ID_PATTERN.test(id) || !CODE_PATTERN.test(state) || ids.has(id)) return undefined;
    ids.add(id);
    items.push({ id, state });
  }
  return { counts, items };
}

/** Validates what a summary hook returned; `invalid_summary` names at most a field of the schema. */
export function parseJobSummary(value: unknown): JobSummary {
  const plain = plainSummary(value);
  if (plain !== undefined) return plain;
  const parsed = JobSummarySchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_summary', 'the job summary', parsed.error);
  return parsed.data;
}

function reportStage(stage: LedgerStage): ReportStage {
  const duration = stage.started_at !== null && stage.finished_at !== null ? millisBetween(stage.started_at, stage.finished_at) : null;
  return {
    stage_id: stage.stage_id,
    status: stage.status,
    started_at: stage.started_at,
    finished_at: stage.finished_at,
    duration_ms: duration,
    error: stage.error,
  };
}

/** Builds the report of a finished run from its header and ledger; fields are picked one by one, never spread. */
export function buildReport(run: JobRun, stages: readonly LedgerStage[], summary: JobSummary | null): JobReport {
  if (run.status === 'running' || run.finished_at === null) {
    throw new JobEnvelopeError('corrupt_checkpoint', `run ${run.run_id} has not finished: it has no report yet`);
  }
  return {
    schema_version: JOB_SCHEMA_VERSION,
    job_type: run.job_type,
    job_id: run.job_id,
    run_id: run.run_id,
    resumed_from: run.resumed_from,
    dry_run: run.dry_run,
    status: run.status,
    started_at: run.job_started_at,
    finished_at: run.finished_at,
    duration_ms: millisBetween(run.job_started_at, run.finished_at),
    stages: stages.map(reportStage),
    summary,
  };
}
