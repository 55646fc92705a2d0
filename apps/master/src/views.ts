import type { HistoryEntry, Observation, RecordReason, RequestRecord } from '@oduflow/protocol';

/*
 * What the CLI shows of a record, the same fields in a table and in --json.
 * Legacy records show their identity and the state they recorded only: their
 * original fields keep their original interpretation and may hold raw
 * output, so they are never printed.
 */

export interface RecordRow {
  readonly request_id: string;
  readonly minion_id: string | null;
  readonly profile: string | null;
  readonly jid: string | null;
  readonly state: string;
  readonly passed: number | null;
  readonly total: number | null;
  /** Why the record is in its state: a closed code. */
  readonly reason: string | null;
  /** The code's specifics: a failure, a refusal, an error code, a cause, readiness reasons... */
  readonly reason_detail: string | null;
  readonly updated_at: string | null;
}

export interface RecordDetail extends RecordRow {
  readonly protocol: number | null;
  readonly role: string | null;
  readonly state_digest: string | null;
  readonly publish_attempts: number | null;
  readonly last_observation: string | null;
  readonly recorded_state: string | null;
  readonly reconciled_by: string | null;
  readonly reconciliation_reason: string | null;
  readonly reconciled_at: string | null;
  readonly created_at: string | null;
}

/** The specifics of a reason, as one word (or a comma-separated list of readiness reasons). */
export function reasonDetail(reason: RecordReason): string | null {
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
      return reason.readiness.join(',');
    case 'refused':
    case 'refused_after_running':
      return reason.refusal;
    case 'minion_error':
      return reason.error;
    case 'binding_conflict':
      return reason.source;
    case 'unknown':
      return reason.cause;
  }
}

/** What the minion said, without the time: `running`, `refused: execution_busy`, `error: malformed_store`, `failure: no_return`. */
export function observationText(o: Observation): string {
  if ('error' in o) return `error: ${o.error}`;
  if ('failure' in o) return `failure: ${o.failure}`;
  return o.status === 'refused' ? `refused: ${o.reason}` : o.status;
}

export function recordRow(r: RequestRecord): RecordRow {
  if (r.protocol === 1) {
    return {
      request_id: r.request_id,
      minion_id: r.minion_id,
      profile: r.profile,
      jid: r.jid,
      state: r.state,
      passed: r.passed,
      total: r.total,
      reason: r.reason?.code ?? null,
      reason_detail: r.reason === null ? null : reasonDetail(r.reason),
      updated_at: r.updated_at,
    };
  }
  return {
    request_id: r.request_id,
    minion_id: r.minion_id,
    profile: null,
    jid: r.jid,
    state: r.state,
    passed: null,
    total: null,
    reason: r.state === 'legacy' ? 'predates_protocol_1' : null,
    reason_detail: null,
    updated_at: r.reconciliation?.at ?? null,
  };
}

export function recordDetail(r: RequestRecord): RecordDetail {
  const reconciliation = {
    reconciled_by: r.reconciliation?.actor ?? null,
    reconciliation_reason: r.reconciliation?.reason ?? null,
    reconciled_at: r.reconciliation?.at ?? null,
  };
  if (r.protocol === 1) {
    return {
      ...recordRow(r),
      protocol: 1,
      role: r.role,
      state_digest: r.state_digest,
      publish_attempts: r.publish_attempts,
      last_observation: r.last_observation === null ? null : `${observationText(r.last_observation)} at ${r.last_observation.at}`,
      recorded_state: null,
      ...reconciliation,
      created_at: r.created_at,
    };
  }
  return {
    ...recordRow(r),
    protocol: null,
    role: null,
    state_digest: null,
    publish_attempts: null,
    last_observation: null,
    recorded_state: r.recorded_state,
    ...reconciliation,
    created_at: null,
  };
}

/** One history entry as a row: the same fields in the table and in --json. */
export function historyRow(e: HistoryEntry): { readonly [K in keyof HistoryEntry]: HistoryEntry[K] } {
  return { seq: e.seq, at: e.at, from_state: e.from_state, to_state: e.to_state, event: e.event, source: e.source, observed: e.observed, reason_code: e.reason_code };
}
