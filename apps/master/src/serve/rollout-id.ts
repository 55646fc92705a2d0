import { canonicalJson } from '@oduflow/protocol';
import { createHash } from 'node:crypto';

/*
 * How an Idempotency-Key binds to a rollout: the rollout's id is a function
 * of the key and its scope (tenant, actor, action), so the key finds its
 * rollout again by name, with no index to keep in step, after any restart.
 * The id is an RFC 9562 version 8 UUID (SHA-256 based, like
 * rolloutRequestId): a canonical id for the job envelope and for the request
 * ids derived from it. The raw key is hashed here and never stored or logged.
 */

const ROLLOUT_ACTION = 'rollout.create';
const DOMAIN = 'oduflow-rollout-key-v1';

export interface RolloutKeyScope {
  readonly tenant: string;
  readonly actor: string;
  readonly key: string;
}

export function rolloutIdOfKey(scope: RolloutKeyScope): string {
  const text = canonicalJson([DOMAIN, scope.tenant, scope.actor, ROLLOUT_ACTION, scope.key]);
  const bytes = createHash('sha256').update(text, 'utf8').digest().subarray(0, 16);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x80;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
