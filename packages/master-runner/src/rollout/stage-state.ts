import { PROFILES, REQUEST_STATES, isMinionId, isRequestId, type JsonValue } from '@oduflow/protocol';
import { z } from 'zod';
import { MasterRunnerError } from '../errors.js';
import { DETAIL_PATTERN, MAX_DETAIL_LENGTH, PENDING, REASON_PATTERN, ROLLOUT_OUTCOMES, type TargetRow } from './outcomes.js';
import { MAX_BATCH_SIZE, MAX_ROLLOUT_TARGETS } from './spec.js';

/*
 * What a rollout stage saves in its checkpoint (ctx.saveState): its targets
 * with the request id fixed for each before anything was dispatched, their
 * outcomes so far, and the running total of the error budget once the batch
 * is settled. Besides the targets, it repeats the few facts of the rollout
 * a reader needs (`rollout show` of a running or past rollout: the inputs
 * themselves are only hashed by the envelope). Parsed strictly on every
 * read: a checkpoint is trusted only in this exact shape.
 */

const Count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const TargetRowSchema = z.strictObject({
  minion_id: z.string().refine(isMinionId),
  request_id: z.string().refine(isRequestId).nullable(),
  outcome: z.enum([...ROLLOUT_OUTCOMES, PENDING]),
  record_state: z.enum(REQUEST_STATES).nullable(),
  reason: z.string().regex(REASON_PATTERN).nullable(),
  detail: z.string().max(MAX_DETAIL_LENGTH).regex(DETAIL_PATTERN).nullable(),
  blocked_by: z.string().refine(isRequestId).nullable(),
  passed: Count.nullable(),
  total: Count.nullable(),
});

export const ROLLOUT_STATE_VERSION = 1;

export const RolloutStageStateSchema = z.strictObject({
  version: z.literal(ROLLOUT_STATE_VERSION),
  profile: z.enum(PROFILES),
  target_count: z.number().int().min(1).max(MAX_ROLLOUT_TARGETS),
  batch_size: z.number().int().min(1).max(MAX_BATCH_SIZE),
  max_unresolved: Count,
  targets: z.array(TargetRowSchema).min(1).max(MAX_BATCH_SIZE),
  /** Failed + unresolved outcomes of this stage and every earlier one; null until this batch is settled. */
  budget_used: Count.nullable(),
});
export type RolloutStageState = Omit<z.infer<typeof RolloutStageStateSchema>, 'targets'> & { readonly targets: readonly TargetRow[] };

/** A stage's saved state, strictly; `rollout_refused` / corrupt_checkpoint otherwise (the field is named, never its value). */
export function parseStageState(value: JsonValue | null, stageId: string): RolloutStageState {
  const parsed = RolloutStageStateSchema.safeParse(value);
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path.filter((p) => typeof p === 'string').join('.') ?? '';
    throw new MasterRunnerError('rollout_refused', `the checkpoint of stage ${stageId} is not a rollout stage state${field === '' ? '' : ` (field ${field})`}`, {
      detail: 'corrupt_checkpoint',
    });
  }
  return parsed.data;
}

/**
 * The state as the envelope stores it (plain canonical JSON), every object
 * built with its keys in canonical (UTF-16 ascending) order: the envelope's
 * canonicalJson then serializes it with one native JSON.stringify instead of
 * sorting every row's keys on each of a stage's three saves. The bytes are the
 * same either way; only the cost differs.
 */
export function stateValue(state: RolloutStageState): JsonValue {
  return {
    batch_size: state.batch_size,
    budget_used: state.budget_used,
    max_unresolved: state.max_unresolved,
    profile: state.profile,
    target_count: state.target_count,
    targets: state.targets.map((row) => ({
      blocked_by: row.blocked_by,
      detail: row.detail,
      minion_id: row.minion_id,
      outcome: row.outcome,
      passed: row.passed,
      reason: row.reason,
      record_state: row.record_state,
      request_id: row.request_id,
      total: row.total,
    })),
    version: state.version,
  };
}
