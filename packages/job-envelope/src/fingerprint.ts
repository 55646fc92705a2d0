import { createHash } from 'node:crypto';
import { canonicalJson } from '@oduflow/protocol';
import { JOB_SCHEMA_VERSION } from './limits.js';
import type { JobSpec } from './spec.js';

/** Lowercase hex SHA-256 of a string's UTF-8 bytes. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Everything that decides whether a checkpoint may be resumed by a job:
 * stored verbatim in every run header, and hashed into its fingerprint.
 */
export interface CompatibilityFields {
  readonly schema_version: typeof JOB_SCHEMA_VERSION;
  readonly workspace_identity_sha256: string;
  readonly job_type: string;
  readonly dry_run: boolean;
  readonly spec_version: number;
  readonly input_sha256: string;
  readonly stage_ids: readonly string[];
}

/** The compatibility fields of a validated spec: the inputs and workspace identity enter only as digests. */
export function compatibilityOf(spec: JobSpec): CompatibilityFields {
  return {
    schema_version: JOB_SCHEMA_VERSION,
    workspace_identity_sha256: sha256Hex(spec.workspace_identity),
    job_type: spec.job_type,
    dry_run: spec.dry_run,
    spec_version: spec.spec_version,
    input_sha256: sha256Hex(canonicalJson(spec.inputs)),
    stage_ids: [...spec.stage_ids],
  };
}

/**
 * The resume fingerprint: SHA-256 of the canonical JSON (RFC 8785 subset, the
 * protocol's one serializer) of exactly the compatibility fields. Any change
 * to one of them — a stage inserted, removed or moved, another input, mode,
 * version or workspace — gives another fingerprint.
 */
export function resumeFingerprint(fields: CompatibilityFields): string {
  return sha256Hex(
    canonicalJson({
      schema_version: fields.schema_version,
      workspace_identity_sha256: fields.workspace_identity_sha256,
      job_type: fields.job_type,
      dry_run: fields.dry_run,
      spec_version: fields.spec_version,
      input_sha256: fields.input_sha256,
      stage_ids: [...fields.stage_ids],
    }),
  );
}
