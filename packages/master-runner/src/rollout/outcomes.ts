import {
  isProtocolRecord,
  isRequestId,
  type CapabilityRejection,
  type RecordReason,
  type RequestRecord,
  type RequestState,
} from '@oduflow/protocol';

/*
 * What a rollout says about each target: one closed code, with a closed
 * reason and detail. Every value in a target's row is an id, a code, a
 * count or null, so nothing else — no message, no path, no state data —
 * can reach a checkpoint, a report or the CLI through it.
 */

export const ROLLOUT_OUTCOMES = [
  /** The apply ran and every state succeeded (a receipt says so). */
  'succeeded',
  /** The apply ran and some state failed (a receipt says so). */
  'failed',
  /** The minion holds a claim without a receipt: the state may have run. Blocks its target. */
  'unknown',
  /** Conflicting evidence: blocks its target until an operator reconciles it. */
  'quarantined',
  /**
   * Not settled when the stage ended: still publishing (published-uncertain),
   * published or running at the stage deadline, or prepared (nothing sent).
   * Blocks its target; poll it or reconcile it.
   */
  'unresolved',
  /** Not applied: the minion's capability answer ruled it out, or it refused the publication (reason says which). */
  'rejected',
  /** An operator reconciled the request (it was unresolved before). */
  'reconciled',
  /** Not dispatched: the target has another unresolved request (`blocked_by`); never forced. */
  'blocked',
  /** Not dispatched: the capability call got no answer (detail: how it failed); nothing recorded. */
  'unreachable',
  /** Not dispatched: no accepted minion key matches; nothing recorded. */
  'no_target',
  /** Dry run: ready and not blocked; it would have been dispatched. */
  'skipped',
] as const;
export type RolloutOutcome = (typeof ROLLOUT_OUTCOMES)[number];

/** A target of a stage that is still being dispatched or polled. */
export const PENDING = 'pending';
export type TargetOutcome = RolloutOutcome | typeof PENDING;

/** Outcomes that consume the error budget: the apply failed, or may have run and is not settled. */
export const BUDGET_OUTCOMES: readonly RolloutOutcome[] = ['failed', 'unknown', 'quarantined', 'unresolved'];

/** A closed code (the reason of an outcome). */
export const REASON_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
/** A reason's specifics: one code, or several separated by commas (readiness reasons). */
export const DETAIL_PATTERN = /^[a-z0-9][a-z0-9_.]{0,63}(,[a-z0-9][a-z0-9_.]{0,63}){0,31}$/;
/** At most this long: a batch of MAX_BATCH_SIZE rows stays well inside the envelope's 1 MiB stage state. */
export const MAX_DETAIL_LENGTH = 256;

/** One target's row: in a stage's checkpoint, in the report, in the CLI's table. */
export interface TargetRow {
  readonly minion_id: string;
  /** The rollout's request for this target (null in a dry run: nothing is requested). */
  readonly request_id: string | null;
  readonly outcome: TargetOutcome;
  /** The request record's state when it was last read (null when there is no record). */
  readonly record_state: RequestState | null;
  /** Why: the record's reason code, or the refusal that kept it from being dispatched. */
  readonly reason: string | null;
  /** The reason's specifics (a failure, a refusal, readiness reasons...). */
  readonly detail: string | null;
  /** The unresolved request that blocks the target (outcome `blocked`). */
  readonly blocked_by: string | null;
  readonly passed: number | null;
  readonly total: number | null;
}

/** A detail only when it is made of codes; anything else is dropped rather than passed on. */
function codes(value: string | null): string | null {
  return value !== null && value.length <= MAX_DETAIL_LENGTH && DETAIL_PATTERN.test(value) ? value : null;
}

/** The specifics of a record's reason, as one code (or a comma-separated list of readiness reasons). */
function reasonDetailOf(reason: RecordReason): string | null {
  switch (reason.code) {
    case 'publish_uncertain':
    case 'publish_not_sent':
    case 'capability_unanswered':
    case 'poll_failed':
      return reason.failure;
    case 'capability_missing':
    case 'capability_unsupported':
      return null;
    case 'not_ready':
      return codes(reason.readiness.join(','));
    case 'refused':
    case 'refused_after_running':
      return reason.refusal;
    case 'minion_error':
      return codes(reason.error);
    case 'binding_conflict':
      return reason.source;
    case 'unknown':
      return reason.cause;
  }
}

export function pendingRow(minionId: string, requestId: string | null): TargetRow {
  return { minion_id: minionId, request_id: requestId, outcome: PENDING, record_state: null, reason: null, detail: null, blocked_by: null, passed: null, total: null };
}

const OUTCOME_OF_STATE: Readonly<Record<RequestState, TargetOutcome>> = {
  prepared: 'unresolved',
  publishing: PENDING,
  published: PENDING,
  running: PENDING,
  succeeded: 'succeeded',
  failed: 'failed',
  unknown: 'unknown',
  rejected: 'rejected',
  quarantined: 'quarantined',
  reconciled: 'reconciled',
  legacy: 'unresolved',
};

/**
 * What a request record says about its target. A record still waiting for a
 * status (publishing, published, running) is `pending` while the stage polls,
 * and `unresolved` once `final` (the stage deadline passed).
 */
export function rowOfRecord(record: RequestRecord, final: boolean): TargetRow {
  const outcome = OUTCOME_OF_STATE[record.state];
  const protocol = isProtocolRecord(record) ? record : undefined;
  return {
    minion_id: record.minion_id ?? '',
    request_id: record.request_id,
    outcome: outcome === PENDING && final ? 'unresolved' : outcome,
    record_state: record.state,
    reason: protocol?.reason?.code ?? null,
    detail: protocol?.reason === null || protocol === undefined ? null : reasonDetailOf(protocol.reason),
    blocked_by: null,
    passed: protocol?.passed ?? null,
    total: protocol?.total ?? null,
  };
}

/** A target the capability answer rules out (dispatch recorded it `rejected`; a dry run only reports it). */
export function rejectedRow(minionId: string, requestId: string | null, rejection: CapabilityRejection, recordState: RequestState | null): TargetRow {
  return {
    ...pendingRow(minionId, requestId),
    outcome: 'rejected',
    record_state: recordState,
    reason: rejection.code,
    detail: rejection.code === 'not_ready' ? codes(rejection.readiness.join(',')) : null,
  };
}

/** A target another unresolved request blocks: reported, never forced. */
export function blockedRow(minionId: string, requestId: string | null, blocker: { readonly request_id: string; readonly state: RequestState }): TargetRow {
  return {
    ...pendingRow(minionId, requestId),
    outcome: 'blocked',
    reason: 'target_blocked',
    detail: blocker.state,
    blocked_by: isRequestId(blocker.request_id) ? blocker.request_id : null,
  };
}

/** A target whose capability call got no answer (`failure`), or that has no accepted key. */
export function notAskedRow(minionId: string, requestId: string | null, kind: 'unreachable' | 'no_target', failure: string | null): TargetRow {
  return {
    ...pendingRow(minionId, requestId),
    outcome: kind,
    reason: kind === 'unreachable' ? 'minion_unreachable' : 'no_target',
    detail: codes(failure),
  };
}

/** Counts of outcomes (only those that occur). */
export function countOutcomes(rows: readonly TargetRow[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const row of rows) counts[row.outcome] = (counts[row.outcome] ?? 0) + 1;
  return counts;
}

/** How many of `rows` consume the error budget. */
export function budgetUsedBy(rows: readonly TargetRow[]): number {
  return rows.filter((row) => (BUDGET_OUTCOMES as readonly string[]).includes(row.outcome)).length;
}
