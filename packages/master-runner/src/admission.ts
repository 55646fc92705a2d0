import { canonicalJson, type CapabilityRejection, type Profile, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { createHash } from 'node:crypto';
import { checkCapability } from './capability.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { validateDispatchInput, type DispatchInput, type ValidDispatch } from './dispatch-input.js';
import { MasterRunnerError } from './errors.js';
import type { AdmissionKey } from './record-store.js';
import { notAsked, refuseIfTargetBlocked, reserve } from './reserve.js';

/*
 * HTTP admission (DESIGN §7; seed 003 "Consistency boundaries"): a stable
 * Idempotency-Key, scoped by tenant, actor and action, returns the same
 * request; the same key with other content is refused; a second admission
 * while the first is in flight is told so. The key is claimed (a lease)
 * before the capability call, and bound by the same create unit that stores
 * the record and its outbox entry, so "admitted" is one durable step and
 * publication is the outbox relay's (outbox-relay.ts). Whatever leaves no
 * record releases the key: the same key may be retried later.
 */

export interface AdmissionScope {
  readonly tenant: string;
  readonly actor: string;
  /** What is admitted (the service's `request.create`). */
  readonly action: string;
  /** The client's Idempotency-Key, as sent (unquoted). */
  readonly key: string;
}

export interface AdmissionContent {
  readonly minionId: string;
  readonly profile: Profile;
  /** '' for the fixed profiles. */
  readonly stateDigest: string;
}

export type AdmissionResult =
  /** New: recorded `prepared` and enqueued in the outbox; the key is bound to it. */
  | { readonly outcome: 'admitted'; readonly record: ProtocolRequestRecord }
  /** New: the minion answered that it cannot execute; recorded `rejected` (terminal, not blocking), key bound, nothing to publish. */
  | { readonly outcome: 'rejected'; readonly record: ProtocolRequestRecord; readonly rejection: CapabilityRejection }
  /** The key's earlier admission with the same content, as stored now. */
  | { readonly outcome: 'replayed'; readonly record: RequestRecord }
  /** The key was used with other content (HTTP 422). */
  | { readonly outcome: 'key_mismatch' }
  /** Another admission of this key is still in flight (HTTP 409). */
  | { readonly outcome: 'key_in_flight' };

export interface AdmitOptions {
  readonly scope: AdmissionScope;
  /** How long the key's claim lives without being bound (default 2 × callTimeoutMs + 30 s). */
  readonly leaseMs?: number;
}

/** The Idempotency-Key draft's upper bound, applied to every part of the scope. */
const MAX_SCOPE_LENGTH = 255;

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Checks a scope as a JavaScript caller may pass it: anything at all. */
function checkScope(scope: unknown): void {
  const fields = (typeof scope === 'object' && scope !== null ? scope : {}) as Record<string, unknown>;
  for (const name of ['tenant', 'actor', 'action', 'key'] as const) {
    const value = fields[name];
    // No control characters: a tenant and an actor are kept with the key for operators.
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    if (typeof value !== 'string' || value.length === 0 || value.length > MAX_SCOPE_LENGTH || /[\u0000-\u001f\u007f]/.test(value)) {
      throw new MasterRunnerError('invalid_input', `an admission's ${name} must be 1 to ${MAX_SCOPE_LENGTH} printable characters`, {
        detail: 'invalid_admission_key',
      });
    }
  }
}

function scopedHash(value: Record<string, string>): string {
  try {
    return sha256Hex(canonicalJson(value));
  } catch (error) {
    // A lone surrogate: outside canonical JSON. The value is never echoed.
    throw new MasterRunnerError('invalid_input', 'an admission key or its content is not well-formed text', { detail: 'invalid_admission_key', cause: error });
  }
}

/** Hashes the scoped key and fingerprints the content: canonical JSON (protocol's canonicalJson) + SHA-256. */
export function admissionKey(scope: AdmissionScope, content: AdmissionContent): AdmissionKey {
  checkScope(scope);
  return {
    keyHash: scopedHash({ action: scope.action, actor: scope.actor, key: scope.key, tenant: scope.tenant }),
    fingerprint: scopedHash({ minion_id: content.minionId, profile: content.profile, state_digest: content.stateDigest }),
    tenant: scope.tenant,
    actor: scope.actor,
  };
}

function leaseOf(d: ResolvedDeps, leaseMs: number | undefined): number {
  const lease = leaseMs ?? 2 * d.callTimeoutMs + 30_000;
  if (!Number.isSafeInteger(lease) || lease <= 0) throw new MasterRunnerError('config_invalid', 'an admission lease must be a positive whole number of milliseconds');
  return lease;
}

/** Validates before anything touches the store; the request id is the admission's own (one per key claim). */
function validate(d: ResolvedDeps, input: DispatchInput, options: AdmitOptions): { valid: ValidDispatch; key: AdmissionKey; leaseMs: number } {
  if (input.requestId !== undefined) {
    throw new MasterRunnerError('invalid_input', 'an admission chooses its own request id; do not pass one', { detail: 'request_id_not_accepted' });
  }
  const valid = validateDispatchInput(input, d.newRequestId);
  const key = admissionKey(options.scope, { minionId: valid.minionId, profile: valid.profile, stateDigest: valid.stateDigest });
  return { valid, key, leaseMs: leaseOf(d, options.leaseMs) };
}

/**
 * Admits one request under an Idempotency-Key: validate (invalid_input
 * before any store access) → claim the key (a replay, a mismatch or a claim
 * in flight answer at once) → refuse a blocked target → the minion's
 * capability (no answer: minion_unreachable / no_target, nothing recorded)
 * → under the target lock: blockers again (target_blocked), then one create
 * unit storing the record, binding the key and, when the minion is ready,
 * enqueueing it for the outbox relay. Whatever throws after the claim
 * releases it first (a key whose record was stored is kept by the store).
 */
export async function admit(deps: MasterDeps, input: DispatchInput, options: AdmitOptions): Promise<AdmissionResult> {
  const d = resolveDeps(deps);
  const { valid, key, leaseMs } = validate(d, input, options);
  const log = d.logger.child({ request_id: valid.requestId, minion_id: valid.minionId });

  const claim = await d.store.claimKey(key, { requestId: valid.requestId, now: d.now(), leaseMs });
  switch (claim.kind) {
    case 'mismatch':
      return { outcome: 'key_mismatch' };
    case 'in_flight':
      return { outcome: 'key_in_flight' };
    case 'admitted': {
      const record = await d.store.get(claim.requestId);
      if (record === undefined) throw new MasterRunnerError('store_corrupt', 'an idempotency key is bound to a request the store does not hold', { requestId: claim.requestId });
      return { outcome: 'replayed', record };
    }
    case 'claimed':
      if (claim.requestId !== valid.requestId) throw new MasterRunnerError('internal', 'the store claimed a key under another request id than asked');
  }

  try {
    await refuseIfTargetBlocked(d, valid.minionId);
    const capability = await checkCapability(d, valid.minionId);
    if (capability.kind === 'unreachable' || capability.kind === 'no_target') {
      log.warn({ capability: capability.kind, failure: capability.kind === 'unreachable' ? capability.failure : null }, 'capability call got no answer; nothing recorded');
      throw notAsked(capability, valid.requestId);
    }
    const rejection = capability.kind === 'rejected' ? capability.rejection : undefined;
    // A rejected record binds the key and is never published: no outbox entry.
    const reserved = await reserve(d, valid, rejection, rejection === undefined ? { key, source: 'admission', outbox: { stateDataJson: valid.stateDataJson } } : { key, source: 'admission' });
    if (reserved.kind === 'claim_lost') {
      // Our claim lapsed and another admission of this key holds it now.
      log.warn('the key claim lapsed before the record was stored; nothing recorded');
      return { outcome: 'key_in_flight' };
    }
    if (reserved.kind === 'existing') throw new MasterRunnerError('internal', 'the request id chosen for an admission is already in use', { requestId: valid.requestId });
    const record = reserved.record;
    log.info({ jid: record.jid, state: record.state }, rejection === undefined ? 'request admitted' : 'request admitted and rejected by its capability answer');
    return rejection === undefined ? { outcome: 'admitted', record } : { outcome: 'rejected', record, rejection };
  } catch (error) {
    await release(d, key, valid.requestId);
    throw error;
  }
}

/** Frees the key for a retry; a failure here only leaves the claim to lapse, so the original error is the one reported. */
async function release(d: ResolvedDeps, key: AdmissionKey, requestId: string): Promise<void> {
  try {
    await d.store.releaseKey(key, requestId);
  } catch (error) {
    d.logger.warn({ request_id: requestId, err: MasterRunnerError.isInstance(error) ? error.code : 'error' }, 'could not release an idempotency key claim; it lapses with its lease');
  }
}
