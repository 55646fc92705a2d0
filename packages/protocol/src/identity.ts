import { ProtocolError } from './errors.js';

/*
 * Identities are matched against the whole string with explicit ASCII classes
 * only. No `\d` (Unicode digits in other regex engines), no `m` flag (so `$`
 * never matches before a trailing newline), no `i` flag (canonical UUIDs are
 * lowercase). Python uses the same patterns with `re.fullmatch`.
 */

/** Canonical RFC 9562 UUID: lowercase, hyphenated, version 1–8, variant `10xx`. Nil and max fail the version nibble. */
const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const MINION_ID = /^client-[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** Salt's JID (`%Y%m%d%H%M%S%f`): 20 ASCII digits, always a string because it exceeds 2^53. */
const JID = /^[0-9]{20}$/;

export function isRequestId(value: unknown): value is string {
  return typeof value === 'string' && CANONICAL_UUID.test(value);
}

export function isMinionId(value: unknown): value is string {
  return typeof value === 'string' && MINION_ID.test(value);
}

export function isJid(value: unknown): value is string {
  return typeof value === 'string' && JID.test(value);
}

/** Returns `value` if it is a canonical UUID string, else throws `invalid_request_id`. */
export function parseRequestId(value: unknown): string {
  if (!isRequestId(value)) {
    throw new ProtocolError('invalid_request_id', 'request id must be a lowercase RFC 9562 UUID (version 1-8)');
  }
  return value;
}

/** Returns `value` if it is `client-` + a canonical UUID, else throws `invalid_minion_id`. */
export function parseMinionId(value: unknown): string {
  if (!isMinionId(value)) {
    throw new ProtocolError('invalid_minion_id', 'minion id must be "client-" followed by a lowercase RFC 9562 UUID');
  }
  return value;
}

/** Returns `value` if it is a string of exactly 20 ASCII digits, else throws `invalid_jid`. */
export function parseJid(value: unknown): string {
  if (!isJid(value)) {
    throw new ProtocolError('invalid_jid', 'JID must be a string of exactly 20 ASCII digits');
  }
  return value;
}
