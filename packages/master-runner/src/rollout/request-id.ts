import { createHash } from 'node:crypto';

/*
 * A rollout fixes each target's request id before it dispatches anything,
 * and fixes it the same way on every entry into the stage: the id is a
 * function of the rollout (the job id, which every run of a resumed job
 * shares) and of the target. So a stage re-run after a crash dispatches the
 * same request ids, and `dispatch` finds each one already recorded (the
 * idempotent `existing` path) instead of creating a second request for a
 * target. The stage also saves them in its checkpoint before dispatching,
 * for `rollout show`.
 *
 * The id is an RFC 9562 version 8 UUID (custom, here SHA-256 based, like a
 * version 5 name-based UUID with a modern hash): 122 bits of the digest,
 * the version nibble 8 and the variant bits 10. It is a canonical request id
 * for @oduflow/protocol (lowercase, version 1–8, variant [89ab], never nil or
 * max).
 */

const DOMAIN = 'oduflow-rollout-request-v1';

export function rolloutRequestId(rolloutId: string, minionId: string): string {
  const bytes = createHash('sha256').update(`${DOMAIN}\n${rolloutId}\n${minionId}`, 'utf8').digest().subarray(0, 16);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x80;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
