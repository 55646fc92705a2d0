import { MAX_STAGES, type JobSpecInput } from '@oduflow/job-envelope';
import { isMinionId, type Profile } from '@oduflow/protocol';
import { validateDispatchInput } from '../dispatch-input.js';
import { MasterRunnerError } from '../errors.js';

/*
 * What a rollout is, fixed before it starts: the profile (and, for custom,
 * the digest of its state data), the canonical target list (sorted by code
 * unit, each minion once), the batch size and the error budget, and the
 * mode. All of it goes into the job's resume fingerprint, so a resume with
 * another list, profile, state data, batch size, budget or mode is refused
 * before anything runs. The state data itself is never stored (like
 * `dispatch`): a custom rollout's resume must be given it again, and its
 * digest must match.
 */

/** The job type of rollouts in a job-envelope workspace (one lock per workspace). */
export const ROLLOUT_JOB_TYPE = 'rollout';
/** Bump when the stages change meaning: older checkpoints then stop resuming (resume_mismatch). */
export const ROLLOUT_SPEC_VERSION = 1;
/** At most this many targets (one report row each). */
export const MAX_ROLLOUT_TARGETS = 100_000;
/** At most this many targets per batch: a batch's state (ids and outcomes) stays far below the envelope's 1 MiB. */
export const MAX_BATCH_SIZE = 1_000;
export const DEFAULT_BATCH_SIZE = 10;
/** The default budget: the first failed or unresolved target halts the rollout after its batch. */
export const DEFAULT_MAX_UNRESOLVED = 0;

export interface RolloutInput {
  readonly profile: string;
  /** Minion ids (`client-<uuid>`), in any order; duplicates are dropped. */
  readonly targets: readonly string[];
  /** Targets per stage (default 10). */
  readonly batchSize?: number;
  /** The rollout halts after a batch when failed + unresolved outcomes exceed this (default 0). */
  readonly maxUnresolved?: number;
  /** Check blockers and capability only; dispatch nothing (default false). */
  readonly dryRun?: boolean;
  /** Canonical JSON high data: with the `custom` profile only. Never stored; give it again to resume. */
  readonly stateDataJson?: string;
}

export interface RolloutSpec {
  readonly profile: Profile;
  /** Canonical: sorted by UTF-16 code unit, unique. */
  readonly targets: readonly string[];
  /** How many duplicate entries the input had. */
  readonly duplicates: number;
  readonly batchSize: number;
  readonly maxUnresolved: number;
  readonly dryRun: boolean;
  readonly stateDataJson: string;
  /** `""` for the fixed roles; the SHA-256 of the canonical high data for custom. */
  readonly stateDigest: string;
  /** The targets of each stage, in stage order. */
  readonly batches: readonly (readonly string[])[];
  readonly stageIds: readonly string[];
}

function invalid(message: string, detail: 'no_targets' | 'too_many_targets' | 'invalid_batch_size' | 'invalid_budget' | 'invalid_minion_id'): never {
  throw new MasterRunnerError('invalid_input', message, { detail });
}

function wholeNumber(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

/** `batch-00001`, `batch-00002`...: the stage id of batch `index` (0-based). */
export function stageIdOf(index: number): string {
  return `batch-${String(index + 1).padStart(5, '0')}`;
}

function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Validates a rollout's input with the protocol's own rules (every target a
 * minion id, the profile, custom state data exactly as `dispatch` checks
 * it) and returns its canonical form. `invalid_input` names a target by its
 * position in the input, never by its value.
 */
export function parseRolloutSpec(input: RolloutInput): RolloutSpec {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a JavaScript caller may pass anything
  if (typeof input !== 'object' || input === null || !Array.isArray(input.targets)) invalid('a rollout needs a list of targets', 'no_targets');
  if (input.targets.length === 0) invalid('a rollout needs at least one target', 'no_targets');
  input.targets.forEach((target, index) => {
    if (!isMinionId(target)) invalid(`target ${index + 1} is not a minion id (client-<uuid>)`, 'invalid_minion_id');
  });
  const targets = [...new Set<string>(input.targets)].sort(byCodeUnit);
  if (targets.length > MAX_ROLLOUT_TARGETS) invalid(`a rollout takes at most ${MAX_ROLLOUT_TARGETS} targets`, 'too_many_targets');
  const batchSize = input.batchSize ?? DEFAULT_BATCH_SIZE;
  if (!wholeNumber(batchSize, 1, MAX_BATCH_SIZE)) invalid(`the batch size must be a whole number from 1 to ${MAX_BATCH_SIZE}`, 'invalid_batch_size');
  const stageCount = Math.ceil(targets.length / batchSize);
  if (stageCount > MAX_STAGES) invalid(`${targets.length} targets in batches of ${batchSize} make more than ${MAX_STAGES} stages; use larger batches`, 'invalid_batch_size');
  const maxUnresolved = input.maxUnresolved ?? DEFAULT_MAX_UNRESOLVED;
  if (!wholeNumber(maxUnresolved, 0, Number.MAX_SAFE_INTEGER)) invalid('the max-unresolved budget must be a whole number of targets', 'invalid_budget');
  if (input.dryRun !== undefined && typeof input.dryRun !== 'boolean') throw new MasterRunnerError('invalid_input', 'dry run is true or false', { detail: 'invalid_rollout_option' });
  // The profile and state data exactly as dispatch will check them, once, before anything runs.
  const valid = validateDispatchInput(
    { minionId: targets[0] as string, profile: input.profile, ...(input.stateDataJson === undefined ? {} : { stateDataJson: input.stateDataJson }) },
    () => '00000000-0000-4000-8000-000000000000',
  );
  const batches: string[][] = [];
  for (let start = 0; start < targets.length; start += batchSize) batches.push(targets.slice(start, start + batchSize));
  return Object.freeze({
    profile: valid.profile,
    targets: Object.freeze(targets),
    duplicates: input.targets.length - targets.length,
    batchSize,
    maxUnresolved,
    dryRun: input.dryRun ?? false,
    stateDataJson: valid.stateDataJson,
    stateDigest: valid.stateDigest,
    batches: Object.freeze(batches.map((batch) => Object.freeze(batch))),
    stageIds: Object.freeze(batches.map((_, index) => stageIdOf(index))),
  });
}

/**
 * The job-envelope spec of a rollout. The inputs (hashed into the resume
 * fingerprint, never stored) are everything that decides what the rollout
 * does; the state data enters only as its digest. The workspace identity
 * names the record store the requests live in: a resume against another
 * store would not find them.
 */
export function rolloutJobSpec(spec: RolloutSpec, workspaceIdentity: string): JobSpecInput {
  return {
    job_type: ROLLOUT_JOB_TYPE,
    spec_version: ROLLOUT_SPEC_VERSION,
    dry_run: spec.dryRun,
    inputs: {
      profile: spec.profile,
      state_digest: spec.stateDigest,
      targets: [...spec.targets],
      batch_size: spec.batchSize,
      max_unresolved: spec.maxUnresolved,
    },
    stage_ids: [...spec.stageIds],
    workspace_identity: workspaceIdentity,
  };
}
