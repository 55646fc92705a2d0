import { NO_HISTORY, isBlocking, isProtocolRecord, isTerminal, type RequestHistory, type RequestRecord } from '@oduflow/protocol';
import { historyView, recordView } from '../schemas.js';
import { blockerView, compareBlockers, type BlockerView } from './overview.js';
import { receiptOf, withHistory, type RequestPage } from './timeline.js';

/*
 * What the dashboard's request and target pages show, built from records
 * and request histories only: every field is one the API already answers (a record never holds
 * state data, raw output or a credential; a custom request only its digest).
 */

/** The request page; without a history (a record written before histories), its timeline is the record's alone. */
export function requestPage(record: RequestRecord, history: RequestHistory = NO_HISTORY): RequestPage {
  return {
    record: recordView(record),
    timeline: isProtocolRecord(record) ? withHistory(record, history) : [],
    history: historyView(record.request_id, history),
    receipt: isProtocolRecord(record) ? receiptOf(record) : null,
    blocking: isBlocking(record),
    // Reconcile applies to every request that is not settled (the API answers 409 for a settled one).
    reconcilable: !isTerminal(record),
  };
}

export interface TargetPage {
  readonly minion_id: string;
  readonly blocked: boolean;
  readonly blockers: readonly BlockerView[];
  /** The target's requests, newest first (at most MAX_TARGET_REQUESTS). */
  readonly requests: readonly BlockerView[];
  readonly more: boolean;
}

const MAX_TARGET_REQUESTS = 200;

export function targetPage(minionId: string, records: readonly RequestRecord[], blockedEverywhere: boolean): TargetPage {
  const views = records.map(blockerView).sort((a, b) => (b.updated_at ?? '').localeCompare(a.updated_at ?? '') || a.request_id.localeCompare(b.request_id));
  const blockers = records.filter(isBlocking).map(blockerView).sort(compareBlockers);
  return {
    minion_id: minionId,
    blocked: blockers.length > 0 || blockedEverywhere,
    blockers,
    requests: views.slice(0, MAX_TARGET_REQUESTS),
    more: views.length > MAX_TARGET_REQUESTS,
  };
}
