import { isMinionId } from '@oduflow/protocol';
import { MinionWrapperError } from './errors.js';

/**
 * The canonical minion id (`client-` + a lowercase RFC 9562 UUID) as
 * `@oduflow/protocol` defines it, so the bootstrap assets can never accept an
 * id that the master or the minion module would refuse.
 */
export function assertCanonicalMinionId(value: unknown): string {
  if (!isMinionId(value)) {
    throw new MinionWrapperError(
      'invalid_minion_id',
      'minion id must be "client-" followed by a lowercase RFC 9562 UUID (version 1-8, variant 8/9/a/b)',
    );
  }
  return value;
}
