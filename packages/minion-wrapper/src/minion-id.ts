import { MinionWrapperError } from './errors.js';

/**
 * The canonical minion id: `client-` + a lowercase, hyphenated RFC 9562 UUID
 * with version 1–8 and variant `[89ab]` (docs/protocol-rules.md). Kept local
 * so the bootstrap assets depend on nothing but Node; the shared fixtures hold
 * it to the same rule as `@oduflow/protocol`.
 */
const MINION_ID = /^client-[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export function isCanonicalMinionId(value: unknown): value is string {
  return typeof value === 'string' && MINION_ID.test(value);
}

export function assertCanonicalMinionId(value: unknown): string {
  if (!isCanonicalMinionId(value)) {
    throw new MinionWrapperError(
      'invalid_minion_id',
      'minion id must be "client-" followed by a lowercase RFC 9562 UUID (version 1-8, variant 8/9/a/b)',
    );
  }
  return value;
}
