import { z } from 'zod';
import { CAPABILITY, PROTOCOL_VERSION } from './constants.js';
import { isSemver, isSha256Hex } from './patterns.js';
import { schemaFailure } from './schema-failure.js';

/*
 * What `oduflow_job.capabilities` answers (module 1.1.0, docs/wire-contract.md
 * "Module 1.1.0 additions"). Parsing checks the shape only; whether the
 * master may publish to that minion is a separate, pure verdict, so a
 * well-formed "not ready" answer is reported with its reasons instead of
 * being lost in a parse error.
 */

/**
 * Every readiness check the minion runs, in the order it reports failures.
 * A closed set shared with `oduflow_job.py`: add, never rename or reorder.
 */
export const READINESS_REASONS = [
  'salt_version',
  'multiprocessing',
  'cache_jobs',
  'pillar_cache',
  'sudo_user',
  'module_executors',
  'salt_internals',
  'store_unsafe',
  // appended by module 1.1.0's implementation: the `gpg` renderer caches decrypted ciphertexts on disk
  'gpg_cache',
] as const;
export type ReadinessReason = (typeof READINESS_REASONS)[number];

/**
 * The first module version whose capabilities answer carries readiness and
 * its digest (six keys). An answer of an earlier version is "an older module".
 */
export const READINESS_MODULE_VERSION = '1.1.0' as const;

const READINESS_ORDER: ReadonlyMap<string, number> = new Map(READINESS_REASONS.map((reason, index) => [reason, index]));

/** Each reason at most once, in READINESS_REASONS order. */
function isOrderedSubset(reasons: readonly string[]): boolean {
  return reasons.every((reason, i) => i === 0 || (READINESS_ORDER.get(reason) ?? -1) > (READINESS_ORDER.get(reasons[i - 1] as string) ?? -1));
}

/** A list of readiness reasons as the protocol writes it: each at most once, in READINESS_REASONS order. */
export const ReadinessReasonsSchema = z
  .array(z.enum(READINESS_REASONS))
  .readonly()
  .refine(isOrderedSubset, { message: 'reasons must be distinct and in protocol order' });

/** Exactly the six keys; `ready` exactly when `reasons` is empty. */
export const CapabilitiesSchema = z
  .strictObject({
    protocol: z.literal(PROTOCOL_VERSION),
    module_version: z.string().refine(isSemver),
    // Any text: whether it is the pinned Salt is the verdict's business, not the shape's.
    salt_version: z.string(),
    module_sha256: z.string().refine(isSha256Hex),
    ready: z.boolean(),
    reasons: ReadinessReasonsSchema,
  })
  .superRefine((value, ctx) => {
    if (value.ready !== (value.reasons.length === 0)) {
      ctx.addIssue({ code: 'custom', path: ['ready'], message: 'ready must be true exactly when there are no reasons' });
    }
  });
export type Capabilities = z.infer<typeof CapabilitiesSchema>;

/** Validates the shape of a capabilities answer; else `invalid_capabilities` (an older module's three-key answer included). */
export function parseCapabilities(value: unknown): Capabilities {
  const parsed = CapabilitiesSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_capabilities', 'capabilities answer', parsed.error);
  return parsed.data;
}

export type CapabilityVerdict =
  | { readonly ready: true }
  | { readonly ready: false; readonly reasons: readonly [ReadinessReason, ...ReadinessReason[]] };

/**
 * Whether a new request may be published to the minion that answered `c`:
 * ready by its own checks AND on exactly the pinned Salt. A minion that calls
 * itself ready on another Salt is not (the master adds `salt_version`), so the
 * verdict never rests on the minion's word alone for what the master can see.
 */
export function capabilityVerdict(c: Capabilities): CapabilityVerdict {
  const reasons = new Set<ReadinessReason>(c.reasons);
  if (c.salt_version !== CAPABILITY.salt_version) reasons.add('salt_version');
  const ordered = READINESS_REASONS.filter((reason) => reasons.has(reason));
  const [first, ...rest] = ordered;
  return first === undefined ? { ready: true } : { ready: false, reasons: [first, ...rest] };
}
