/*
 * The shapes the dashboard reads, as oduflow-master serves them (their
 * owner is apps/master/src/serve/dashboard; these are the fields the pages
 * use). Every value is an id, a code, a count or an instant: a record never
 * holds state data, raw output or a credential.
 */

export type RequestState =
  | 'prepared'
  | 'publishing'
  | 'published'
  | 'running'
  | 'succeeded'
  | 'failed'
  | 'unknown'
  | 'rejected'
  | 'quarantined'
  | 'reconciled'
  | 'legacy';

export const REQUEST_STATES: readonly RequestState[] = [
  'quarantined',
  'unknown',
  'legacy',
  'publishing',
  'published',
  'running',
  'prepared',
  'failed',
  'rejected',
  'succeeded',
  'reconciled',
];

export interface Whoami {
  readonly tenant: string;
  readonly actor: string;
  readonly token_id: string;
  readonly scopes: readonly string[];
  readonly rollouts: boolean;
}

export interface BlockerView {
  readonly request_id: string;
  readonly state: RequestState;
  readonly jid: string | null;
  readonly profile: string | null;
  readonly reason: string | null;
  readonly updated_at: string | null;
}

export interface BlockedTarget {
  readonly minion_id: string;
  readonly blockers: readonly BlockerView[];
}

export interface Overview {
  readonly targets: number;
  readonly total: number;
  readonly counts: Readonly<Record<RequestState, number>>;
  readonly blocked: readonly BlockedTarget[];
  readonly blocked_everywhere: number;
  readonly generated_at: string;
}

interface Observation {
  readonly at: string;
  readonly status?: string;
  readonly reason?: string;
  readonly error?: string;
  readonly failure?: string;
}

interface RecordView {
  readonly protocol: 1 | null;
  readonly request_id: string;
  readonly minion_id: string | null;
  readonly jid: string | null;
  readonly state: RequestState;
  readonly profile?: string;
  readonly role?: string;
  readonly state_digest?: string;
  readonly publish_attempts?: number;
  readonly last_observation?: Observation | null;
  readonly passed?: number;
  readonly total?: number;
  readonly reason?: ({ readonly code: string } & Readonly<Record<string, unknown>>) | null;
  readonly reconciliation: { readonly reason: string; readonly actor: string; readonly at: string } | null;
  readonly created_at?: string;
  readonly updated_at?: string;
  readonly recorded_state?: string | null;
}

export interface TimelineEntry {
  readonly step: 'prepared' | 'intent' | 'publication' | 'answer' | 'outcome';
  readonly status: 'done' | 'pending' | 'skipped' | 'uncertain';
  readonly summary: string;
  readonly at: string | null;
  readonly source: string;
  /** history: the time and source are the history entry's; record: derived from the record alone. */
  readonly evidence: 'history' | 'record';
}

/** One committed change of a request (GET /v1/requests/{id}/history). */
interface HistoryEntry {
  readonly seq: number;
  readonly at: string;
  readonly from_state: RequestState | null;
  readonly to_state: RequestState;
  readonly event: string;
  readonly source: string;
  readonly observed: string | null;
  readonly reason_code: string | null;
}

export interface RequestHistory {
  readonly request_id: string;
  /** false: the record predates request histories. */
  readonly kept: boolean;
  readonly entries: readonly HistoryEntry[];
  readonly dropped: number;
}

export interface RequestPage {
  readonly record: RecordView;
  readonly timeline: readonly TimelineEntry[];
  readonly history: RequestHistory;
  readonly receipt: { readonly kind: 'receipt' | 'status_answer'; readonly canonical: string } | null;
  readonly blocking: boolean;
  readonly reconcilable: boolean;
}

export interface TargetPage {
  readonly minion_id: string;
  readonly blocked: boolean;
  readonly blockers: readonly BlockerView[];
  readonly requests: readonly BlockerView[];
  readonly more: boolean;
}

export interface RolloutSummary {
  /** What its page is addressed by: the rollout id (asked over HTTP) or the run id (run by the CLI). */
  readonly id: string;
  readonly source: 'http' | 'cli';
  readonly run_id: string;
  readonly rollout_id: string;
  readonly status: string;
  readonly dry_run: boolean;
  readonly profile: string | null;
  readonly target_count: number | null;
  readonly budget_used: number;
  readonly max_unresolved: number | null;
  readonly stages: number;
  readonly stages_settled: number;
  readonly started_at: string;
  readonly finished_at: string | null;
  readonly superseded_by: string | null;
}

export interface RolloutTargetRow {
  readonly minion_id: string;
  readonly request_id: string | null;
  readonly outcome: string;
  readonly record_state: RequestState | null;
  readonly reason: string | null;
  readonly detail: string | null;
  readonly blocked_by: string | null;
  readonly passed: number | null;
  readonly total: number | null;
}

interface RolloutStage {
  readonly stage_id: string;
  readonly status: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly duration_ms: number | null;
  readonly error: string | null;
  readonly targets: number | null;
}

export interface RolloutReport {
  /** Only in the page's first answer: http (run by the service for this tenant) or cli. */
  readonly source?: 'http' | 'cli';
  readonly rollout_id: string;
  readonly run_id: string;
  readonly resumed_from: string | null;
  readonly superseded_by: string | null;
  readonly dry_run: boolean;
  readonly status: string;
  readonly halted: string | null;
  readonly profile: string | null;
  readonly target_count: number | null;
  readonly batch_size: number | null;
  readonly max_unresolved: number | null;
  readonly budget_used: number;
  readonly started_at: string;
  readonly finished_at: string | null;
  readonly duration_ms: number | null;
  readonly counts: Readonly<Record<string, number>>;
  readonly stages: readonly RolloutStage[];
  readonly targets: readonly RolloutTargetRow[];
}

export interface RequestEvent {
  readonly seq: number;
  readonly before: RequestState | null;
  readonly page: RequestPage;
}
