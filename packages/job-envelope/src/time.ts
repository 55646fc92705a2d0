import { z } from 'zod';

/** `Date.prototype.toISOString()` of a UTC instant: millisecond precision, always `Z`. */
const UTC_TIMESTAMP = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$/;

/** True for a real UTC instant written exactly as `toISOString()` writes it (no 24:00, no Feb 30, no offsets). */
function isUtcTimestamp(value: unknown): value is string {
  if (typeof value !== 'string' || !UTC_TIMESTAMP.test(value)) return false;
  const ms = Date.parse(value);
  return Number.isFinite(ms) && new Date(ms).toISOString() === value;
}

export const UtcTimestampSchema = z.string().refine(isUtcTimestamp);

/** Milliseconds from `from` to `to` (both valid timestamps). */
export function millisBetween(from: string, to: string): number {
  return Date.parse(to) - Date.parse(from);
}

/** True when `a` is not later than `b`. */
export function notAfter(a: string, b: string): boolean {
  return Date.parse(a) <= Date.parse(b);
}

/**
 * Timestamps for one runner: UTC, and never earlier than the last one it
 * handed out or the latest one already in the ledger it continues. A wall
 * clock stepped backwards (NTP, a VM restore) would otherwise write a ledger
 * whose own order check refuses it on the next resume.
 */
export function monotonicStamps(clock: () => Date, floor: string | undefined): () => string {
  let last = floor === undefined ? Number.NEGATIVE_INFINITY : Date.parse(floor);
  return () => {
    const now = clock().getTime();
    if (!Number.isFinite(now)) throw new TypeError('the clock returned an invalid Date');
    last = Math.max(last, now);
    return new Date(last).toISOString();
  };
}
