import { isBlocking, type ProtocolRequestRecord } from '@oduflow/protocol';

/*
 * The "at most one unresolved request per target" invariant, checked over
 * time rather than only at the end: from the records (when each one started
 * to hold its target, and when it let go) and from the publications the
 * salt-api stand-in saw (when each one reached "Salt"), all on the one clock
 * of this machine.
 *
 * A record holds its target from its `created_at` (set under the target
 * lock, after the blockers were checked) until its `updated_at` once it no
 * longer blocks (a terminal record is never written again), or for ever
 * while it still blocks. A record rejected at admission was never blocking:
 * its interval is empty (created_at = updated_at). Intervals are half-open,
 * so one request resolving in the same millisecond as the next one is
 * admitted is not an overlap. Both timestamps can only be earlier than the
 * moment they describe (they are taken just before the write), never later,
 * so a legal history never fails these checks; an illegal one fails them
 * unless everything involved happened within the same millisecond.
 */

export interface TimedPublication {
  readonly requestId: string;
  readonly minionId: string;
  /** Epoch ms at which the stand-in received it. */
  readonly at: number;
}

export type TimelineViolation =
  /** Two records of one target held it at the same time. */
  | { readonly kind: 'overlapping_holds'; readonly minionId: string; readonly requestIds: readonly [string, string] }
  /** A publication reached Salt while another request of its target held it. */
  | { readonly kind: 'published_while_held'; readonly minionId: string; readonly requestId: string; readonly heldBy: string; readonly at: number }
  /** A publication reached Salt before its request was created or after it was resolved. */
  | { readonly kind: 'published_outside_own_hold'; readonly minionId: string; readonly requestId: string; readonly at: number }
  /** A publication for a request id the store does not hold, or to another minion than its record's. */
  | { readonly kind: 'published_unknown_request'; readonly minionId: string; readonly requestId: string; readonly at: number };

interface Hold {
  readonly requestId: string;
  readonly from: number;
  readonly until: number;
}

function holdOf(record: ProtocolRequestRecord): Hold {
  const from = Date.parse(record.created_at);
  const until = isBlocking(record) ? Number.POSITIVE_INFINITY : Date.parse(record.updated_at);
  return { requestId: record.request_id, from, until };
}

function byTarget<T>(items: readonly T[], minionOf: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const key = minionOf(item);
    const list = out.get(key) ?? [];
    list.push(item);
    out.set(key, list);
  }
  return out;
}

/** Every violation of the invariant in this history; empty for a legal one. */
export function timelineViolations(records: readonly ProtocolRequestRecord[], publications: readonly TimedPublication[]): TimelineViolation[] {
  const violations: TimelineViolation[] = [];
  const holds = new Map<string, Hold[]>();
  for (const [minionId, list] of byTarget(records, (r) => r.minion_id)) {
    const sorted = list.map(holdOf).filter((h) => h.until > h.from).sort((a, b) => a.from - b.from);
    holds.set(minionId, sorted);
    for (let i = 0; i < sorted.length; i += 1) {
      for (let j = i + 1; j < sorted.length; j += 1) {
        const [a, b] = [sorted[i] as Hold, sorted[j] as Hold];
        if (a.from < b.until && b.from < a.until) violations.push({ kind: 'overlapping_holds', minionId, requestIds: [a.requestId, b.requestId] });
      }
    }
  }
  const byId = new Map(records.map((r) => [r.request_id, r]));
  for (const p of publications) {
    const own = byId.get(p.requestId);
    if (own === undefined || own.minion_id !== p.minionId) {
      violations.push({ kind: 'published_unknown_request', minionId: p.minionId, requestId: p.requestId, at: p.at });
      continue;
    }
    const hold = holdOf(own);
    // Closed at its end: the answer that resolves a request can be recorded in the millisecond it was published.
    if (p.at < hold.from || p.at > hold.until) violations.push({ kind: 'published_outside_own_hold', minionId: p.minionId, requestId: p.requestId, at: p.at });
    for (const other of holds.get(p.minionId) ?? []) {
      if (other.requestId !== p.requestId && other.from < p.at && p.at < other.until) {
        violations.push({ kind: 'published_while_held', minionId: p.minionId, requestId: p.requestId, heldBy: other.requestId, at: p.at });
      }
    }
  }
  return violations;
}
