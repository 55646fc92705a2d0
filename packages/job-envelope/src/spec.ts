import { type JsonValue, canonicalJson, isCanonicalJsonValue } from '@oduflow/protocol';
import { z } from 'zod';
import { JobEnvelopeError } from './errors.js';
import { JOB_TYPE_PATTERN, MAX_INPUT_BYTES, MAX_STAGES, MAX_WORKSPACE_IDENTITY_LENGTH, STAGE_ID_PATTERN } from './limits.js';
import { schemaFailure } from './schema-failure.js';

/** True when no value occurs twice in `values`. */
export function allDistinct(values: readonly string[]): boolean {
  return new Set(values).size === values.length;
}

/**
 * What a job is, fixed before it starts. Everything here except the inputs
 * and the workspace identity is stored in the checkpoint; those two are
 * stored only as SHA-256 digests (they may name hosts or carry data that has
 * no business on disk twice), and all of it goes into the resume fingerprint.
 */
export const JobSpecSchema = z.strictObject({
  /** The kind of job (`rollout`, `migrate-store`...); one lock per job type and workspace. */
  job_type: z.string().regex(JOB_TYPE_PATTERN),
  /** Version of the job's own definition: bump it when the stages' meaning changes, and old runs stop resuming. */
  spec_version: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  /** Dry-run mode: recorded and handed to every stage; a dry run never resumes a real one or the reverse. */
  dry_run: z.boolean(),
  /** The job's canonical inputs (for a rollout: profile and canonical target list), hashed into the fingerprint. */
  inputs: z.custom<JsonValue>((value) => {
    try {
      return isCanonicalJsonValue(value);
    } catch {
      return false; // a throwing getter or a hostile proxy is simply not canonical JSON
    }
  }),
  /** The stages, in order, by id: unique, explicit, at most MAX_STAGES. */
  stage_ids: z
    .array(z.string().regex(STAGE_ID_PATTERN))
    .min(1)
    .max(MAX_STAGES)
    .refine(allDistinct, { message: 'stage ids must be unique' }),
  /** Names the world the job acts on (for a rollout: the record store and salt-api it dispatches to). Hashed. */
  workspace_identity: z.string().min(1).max(MAX_WORKSPACE_IDENTITY_LENGTH),
});

type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** A validated, deeply frozen job spec. */
export type JobSpec = DeepReadonly<z.infer<typeof JobSpecSchema>>;
/** What a caller passes to parseJobSpec / runJob. */
export type JobSpecInput = z.input<typeof JobSpecSchema>;

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/**
 * Validates a spec and returns a frozen deep copy of it, so nothing the
 * caller changes later can make the running job differ from its fingerprint.
 * `invalid_spec` names the field, never its value.
 */
export function parseJobSpec(value: unknown): JobSpec {
  const result = JobSpecSchema.safeParse(value);
  if (!result.success) throw schemaFailure('invalid_spec', 'the job spec', result.error);
  const inputsText = canonicalJson(result.data.inputs);
  if (Buffer.byteLength(inputsText, 'utf8') > MAX_INPUT_BYTES) {
    throw new JobEnvelopeError('invalid_spec', `the job spec's inputs exceed ${MAX_INPUT_BYTES} canonical bytes`);
  }
  // A copy through canonical JSON: plain data only, detached from the caller's objects.
  const copy = { ...result.data, inputs: JSON.parse(inputsText) as JsonValue, stage_ids: [...result.data.stage_ids] };
  return deepFreeze(copy);
}
