import type { RecordStore } from '@oduflow/master-runner';
import { REQUEST_STATES, isBlocking, type RequestRecord, type RequestState } from '@oduflow/protocol';

/*
 * The fleet overview of one tenant: how many of its requests are in each
 * state, and every blocked target with the requests that block it, the
 * ones waiting for a human (quarantined, unknown, legacy) first. Computed
 * when a dashboard opens (one walk over the tenant's records, a page at a
 * time); afterwards the dashboard keeps it current from the change events.
 */

/** Most urgent first: what needs an operator, then what may still settle by itself. */
const ATTENTION_ORDER: readonly RequestState[] = ['quarantined', 'unknown', 'legacy', 'publishing', 'published', 'running', 'prepared'];

export interface BlockerView {
  readonly request_id: string;
  readonly state: RequestState;
  readonly jid: string | null;
  readonly profile: string | null;
  readonly reason: string | null;
  readonly updated_at: string | null;
}

interface BlockedTarget {
  readonly minion_id: string;
  readonly blockers: readonly BlockerView[];
}

export interface Overview {
  readonly targets: number;
  readonly total: number;
  readonly counts: Readonly<Record<RequestState, number>>;
  /** Blocked targets, the most urgent blocker first. */
  readonly blocked: readonly BlockedTarget[];
  /** Legacy records that name no target block every target; the tenant is told how many, never which. */
  readonly blocked_everywhere: number;
  readonly generated_at: string;
}

const rank = (state: RequestState): number => {
  const at = ATTENTION_ORDER.indexOf(state);
  return at === -1 ? ATTENTION_ORDER.length : at;
};

export function blockerView(record: RequestRecord): BlockerView {
  if (record.protocol === 1) {
    return { request_id: record.request_id, state: record.state, jid: record.jid, profile: record.profile, reason: record.reason?.code ?? null, updated_at: record.updated_at };
  }
  return { request_id: record.request_id, state: record.state, jid: record.jid, profile: null, reason: null, updated_at: null };
}

export function compareBlockers(a: BlockerView, b: BlockerView): number {
  return rank(a.state) - rank(b.state) || (a.updated_at ?? '').localeCompare(b.updated_at ?? '') || a.request_id.localeCompare(b.request_id);
}

export async function computeOverview(
  store: RecordStore,
  minionIds: readonly string[],
  unboundLegacy: readonly string[],
  now: Date,
): Promise<Overview> {
  const counts = Object.fromEntries(REQUEST_STATES.map((s) => [s, 0])) as Record<RequestState, number>;
  const byTarget = new Map<string, BlockerView[]>();
  let total = 0;
  if (minionIds.length > 0) {
    for await (const page of store.scan({ minionIds })) {
      for (const record of page) {
        total += 1;
        counts[record.state] += 1;
        if (isBlocking(record) && record.minion_id !== null) {
          const list = byTarget.get(record.minion_id) ?? [];
          list.push(blockerView(record));
          byTarget.set(record.minion_id, list);
        }
      }
    }
  }
  let everywhere = 0;
  for (const id of unboundLegacy) {
    const record = await store.get(id);
    if (record !== undefined && isBlocking(record)) everywhere += 1;
  }
  const blocked = [...byTarget.entries()]
    .map(([minion_id, blockers]) => ({ minion_id, blockers: blockers.sort(compareBlockers) }))
    .sort((a, b) => compareBlockers(a.blockers[0] as BlockerView, b.blockers[0] as BlockerView) || a.minion_id.localeCompare(b.minion_id));
  return { targets: minionIds.length, total, counts, blocked, blocked_everywhere: everywhere, generated_at: now.toISOString() };
}
