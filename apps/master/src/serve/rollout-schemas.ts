import { MAX_BATCH_SIZE, MAX_ROLLOUT_TARGETS, RolloutReportSchema } from '@oduflow/master-runner';
import { PROFILES, isMinionId } from '@oduflow/protocol';
import { z } from 'zod';

/*
 * The rollout routes' bodies, queries and answers, once: the routes validate
 * with them and /openapi.json is generated from them. A rollout is shown as
 * master-runner's fixed-field report (RolloutReportSchema, strict: ids,
 * closed codes, counts, timestamps): never a path, an exception message,
 * state data or a credential.
 */

const MinionId = z.string().refine(isMinionId, { message: 'not a minion id' }).meta({ description: 'client-<canonical uuid>' });

/** Room for MAX_ROLLOUT_TARGETS minion ids (47 bytes each as JSON) and 64 KiB of high data with some whitespace. */
export const ROLLOUT_BODY_LIMIT_BYTES = MAX_ROLLOUT_TARGETS * 48 + 256 * 1024;

export const CreateRolloutBodySchema = z
  .strictObject({
    profile: z.enum(PROFILES),
    targets: z
      .array(MinionId)
      .min(1)
      .max(MAX_ROLLOUT_TARGETS)
      .describe('the minions to apply the profile to, in any order (duplicates are dropped); every one must be the tenant’s'),
    batch_size: z.number().int().min(1).max(MAX_BATCH_SIZE).optional().describe('targets per batch (default 10)'),
    max_unresolved: z
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .describe('the rollout halts after a batch once failed + unresolved targets exceed this (default 0)'),
    dry_run: z.boolean().optional().describe('dispatch nothing: check blockers and capabilities only (default false)'),
    state_data: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'custom profile only, required there (and the dispatch:custom scope): the high data. Canonicalized and bound by its SHA-256 (state_digest); kept by the service only until the rollout ends, never shown.',
      ),
  })
  .meta({ id: 'CreateRollout' });

export const RolloutViewSchema = RolloutReportSchema.meta({
  id: 'RolloutReport',
  description:
    'The rollout as its checkpoints say now (the latest run: a resume after a restart is a new run of the same rollout): counts by outcome, each batch, and one row per target reached. Fixed fields only.',
});

export const RolloutIdParamsSchema = z.strictObject({ id: z.string().max(255).describe('a rollout id (the UUID the POST answered)') });

export const RolloutListQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(512).optional().describe('next_cursor of the previous page'),
});

const Count = z.number().int().min(0);
/** A run's status as a reader sees it (the report's), or `unreadable`. */
const LISTED_STATUSES = [...RolloutReportSchema.shape.status.options, 'unreadable'] as const;

const RolloutListItemSchema = z
  .strictObject({
    rollout_id: z.string(),
    run_id: z.string().nullable().describe('the latest run of the rollout'),
    status: z.enum(LISTED_STATUSES).describe('interrupted: its process is gone, the next start of the service resumes it; unreadable: its checkpoint does not prove consistent'),
    dry_run: z.boolean(),
    profile: z.enum(PROFILES),
    target_count: Count,
    batch_size: Count,
    max_unresolved: Count,
    created_at: z.string(),
    finished_at: z.string().nullable(),
    stages: Count.nullable(),
    stages_succeeded: Count.nullable(),
    stages_failed: Count.nullable(),
  })
  .meta({ id: 'RolloutSummary' });

export const RolloutListSchema = z
  .strictObject({
    items: z.array(RolloutListItemSchema).describe('in rollout-id order'),
    next_cursor: z.string().nullable().describe('pass as `cursor` for the next page; null on the last page'),
  })
  .meta({ id: 'RolloutList' });
