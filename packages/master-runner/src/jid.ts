/*
 * Salt JIDs are `%Y%m%d%H%M%S%f`: 20 digits, microseconds last. The runner
 * picks its own JID before publishing (salt-api passes a caller `jid` through
 * to the master), from an injected clock so tests are deterministic. JavaScript
 * clocks have millisecond resolution, so the microsecond digits start at
 * `000` and are bumped when the store already holds that JID.
 */

function pad(value: number, width: number): string {
  return String(value).padStart(width, '0');
}

/** The Salt-format JID for an instant (UTC). */
export function jidForInstant(instant: Date): string {
  const ms = instant.getTime();
  if (!Number.isFinite(ms)) throw new RangeError('the clock returned an invalid date');
  return (
    pad(instant.getUTCFullYear(), 4) +
    pad(instant.getUTCMonth() + 1, 2) +
    pad(instant.getUTCDate(), 2) +
    pad(instant.getUTCHours(), 2) +
    pad(instant.getUTCMinutes(), 2) +
    pad(instant.getUTCSeconds(), 2) +
    pad(instant.getUTCMilliseconds() * 1000, 6)
  );
}

/** The JID one microsecond later; a 20-digit string beyond 2^53, so BigInt. */
export function nextJid(jid: string): string {
  return (BigInt(jid) + 1n).toString().padStart(20, '0');
}
