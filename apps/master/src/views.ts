import type { RequestRecord } from '@oduflow/protocol';

/*
 * What the CLI shows of a record, the same fields in a table and in --json.
 * Legacy records show their identity only: their original fields keep their
 * original interpretation and may hold raw output, so they are never printed.
 */

export interface RecordRow {
  readonly request_id: string;
  readonly minion_id: string | null;
  readonly profile: string | null;
  readonly jid: string | null;
  readonly state: string;
  readonly passed: number | null;
  readonly total: number | null;
  readonly reason: string | null;
  readonly updated_at: string | null;
}

export interface RecordDetail extends RecordRow {
  readonly protocol: number | null;
  readonly role: string | null;
  readonly state_digest: string | null;
  readonly publish_attempts: number | null;
  readonly last_observation: string | null;
  readonly reconciled_by: string | null;
  readonly reconciliation_reason: string | null;
  readonly reconciled_at: string | null;
  readonly created_at: string | null;
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
      reason: r.reason,
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
    reason: r.state === 'legacy' ? 'predates protocol 1' : null,
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
      last_observation: r.last_observation === null ? null : `${r.last_observation.status} at ${r.last_observation.at}`,
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
    ...reconciliation,
    created_at: null,
  };
}
