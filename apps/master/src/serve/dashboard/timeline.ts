import { ReceiptSchema, canonicalJson, type HistoryEntry, type HistorySource, type ProtocolRequestRecord, type RecordReason, type RequestHistory } from '@oduflow/protocol';
import type { RecordView, RequestHistoryView } from '../schemas.js';

/*
 * A request's timeline: prepared → intent → publication → answers →
 * outcome, each with its time and the source of its evidence. With the
 * request's history (the store's entry per committed change), each step that
 * happened takes the time and the source of the entry that recorded it
 * (withHistory). A record written before histories falls back to the view
 * from its record alone (timelineOf), below.
 *
 * From the record alone: prepared → intent →
 * publication → answers → outcome, each with the time the record proves and
 * the evidence it rests on. The record keeps one instant per step only where
 * the step was its last write (created_at; updated_at of the latest change;
 * the latest answer's `at`; the reconciliation's `at`); every other time was
 * overwritten and is shown as not recorded rather than guessed. Earlier
 * answers are not kept (only the latest), and whether an answer came from a
 * status poll or from salt-api's event stream is not recorded either.
 */

export const TIMELINE_STEPS = ['prepared', 'intent', 'publication', 'answer', 'outcome'] as const;
type TimelineStep = (typeof TIMELINE_STEPS)[number];

/** done: the record proves it; pending: not (yet) reached; skipped: the request never needed it. */
type StepStatus = 'done' | 'pending' | 'skipped' | 'uncertain';

export interface TimelineEntry {
  readonly step: TimelineStep;
  readonly status: StepStatus;
  /** What happened, in operator terms. */
  readonly summary: string;
  /** When, if the record proves it; null: the record does not keep this instant. */
  readonly at: string | null;
  /** The evidence: the history entry that recorded the step (and which part of the master saw it), or the record's field. */
  readonly source: string;
  /** Where `at` and `source` come from. */
  readonly evidence: 'history' | 'record';
}

export interface RequestPage {
  readonly record: RecordView;
  readonly timeline: readonly TimelineEntry[];
  /** Every committed change, oldest first (capped); kept false for a record written before histories. */
  readonly history: RequestHistoryView;
  /** The exact canonical receipt (or the minion's terminal status answer) the outcome rests on; null before there is one. */
  readonly receipt: { readonly kind: 'receipt' | 'status_answer'; readonly canonical: string } | null;
  readonly blocking: boolean;
  readonly reconcilable: boolean;
}

function reasonText(reason: RecordReason): string {
  switch (reason.code) {
    case 'publish_uncertain':
      return `the publish call failed after bytes may have left (${reason.failure}): published-uncertain, never published again`;
    case 'publish_not_sent':
      return `the publish call provably sent nothing (${reason.failure}): back to prepared with the same JID`;
    case 'capability_missing':
      return 'the minion answered without the oduflow_job module';
    case 'capability_unsupported':
      return 'the minion runs another module version';
    case 'not_ready':
      return `the minion is not ready: ${reason.readiness.join(', ')}`;
    case 'capability_unanswered':
      return `the capability call got no answer (${reason.failure})`;
    case 'refused':
      return `the minion refused the publication (${reason.refusal}) and proved it never ran`;
    case 'refused_after_running':
      return `the minion refused (${reason.refusal}) after it had answered running: contradictory evidence`;
    case 'poll_failed':
      return `the latest status call gave nothing usable (${reason.failure})`;
    case 'minion_error':
      return `the minion answered the error ${reason.error}`;
    case 'binding_conflict':
      return `evidence bound to another request, JID, profile or digest (found by the ${reason.source})`;
    case 'unknown':
      return reason.cause === 'status_unknown_after_running'
        ? 'the minion holds a claim without a terminal receipt, after it had answered running: the state may have run'
        : 'the minion holds a claim without a terminal receipt: the state may have run, wholly or in part';
  }
}

const CAPABILITY_REJECTIONS = new Set<RecordReason['code']>(['capability_missing', 'capability_unsupported', 'not_ready', 'capability_unanswered']);

function answerText(observation: NonNullable<ProtocolRequestRecord['last_observation']>): string {
  if ('status' in observation) return observation.status === 'refused' ? `refused: ${observation.reason}` : observation.status;
  if ('error' in observation) return `error: ${observation.error}`;
  return `no usable answer: ${observation.failure}`;
}

const OUTCOME_SUMMARY: Partial<Record<ProtocolRequestRecord['state'], (r: ProtocolRequestRecord) => string>> = {
  succeeded: (r) => `succeeded: ${r.passed} of ${r.total} states passed`,
  failed: (r) => `failed: ${r.passed} of ${r.total} states passed`,
  unknown: () => 'unknown: waiting for an operator; never executed again',
  quarantined: () => 'quarantined: conflicting evidence; waiting for an operator',
};

type RecordStep = Omit<TimelineEntry, 'evidence'>;

/** The steps of a protocol-1 record, from the record alone. */
export function timelineOf(r: ProtocolRequestRecord): TimelineEntry[] {
  return recordSteps(r).map((step) => ({ ...step, evidence: 'record' }));
}

function recordSteps(r: ProtocolRequestRecord): RecordStep[] {
  const entries: RecordStep[] = [];
  const lastWriteIs = (quiet: boolean): string | null => (quiet ? r.updated_at : null);
  const rejectedAtCapability = r.state === 'rejected' && r.reason !== null && CAPABILITY_REJECTIONS.has(r.reason.code);
  const reconciledBeforePublishing = r.state === 'reconciled' && r.publish_attempts === 0;

  entries.push({
    step: 'prepared',
    status: 'done',
    summary: `request recorded with its JID ${r.jid} before anything was published`,
    at: r.created_at,
    source: 'record: created_at',
  });

  if (rejectedAtCapability || reconciledBeforePublishing || r.publish_attempts === 0) {
    const skipped = rejectedAtCapability || reconciledBeforePublishing;
    entries.push({
      step: 'intent',
      status: skipped ? 'skipped' : 'pending',
      summary: skipped ? 'never published' : 'waiting for the outbox relay to record the publish intent',
      at: null,
      source: 'record: publish_attempts = 0',
    });
    entries.push({ step: 'publication', status: skipped ? 'skipped' : 'pending', summary: skipped ? 'never published' : 'not published yet', at: null, source: 'record: state' });
  } else {
    const publishing = r.state === 'publishing';
    entries.push({
      step: 'intent',
      status: 'done',
      summary: `publish intent recorded before salt-api was called (attempt ${r.publish_attempts})`,
      // The intent's instant is kept only while it is the record's last write.
      at: lastWriteIs(publishing && r.reason === null && r.last_observation === null),
      source: 'record: publish_attempts',
    });
    if (r.state === 'prepared') {
      entries.push({
        step: 'publication',
        status: 'pending',
        summary: r.reason === null ? 'not published' : reasonText(r.reason),
        at: lastWriteIs(r.last_observation === null),
        source: 'record: reason',
      });
    } else if (publishing) {
      entries.push({
        step: 'publication',
        status: 'uncertain',
        summary: r.reason?.code === 'publish_uncertain' ? reasonText(r.reason) : 'no acknowledgement recorded: published-uncertain, polled, never published again',
        at: lastWriteIs(r.last_observation === null),
        source: 'record: state publishing, reason',
      });
    } else {
      entries.push({
        step: 'publication',
        status: 'done',
        summary: 'salt-api acknowledged the publication with this JID to exactly this minion',
        at: lastWriteIs(r.state === 'published' && r.last_observation === null),
        source: 'record: state',
      });
    }
  }

  const observation = r.last_observation;
  entries.push(
    observation === null
      ? { step: 'answer', status: rejectedAtCapability || reconciledBeforePublishing ? 'skipped' : 'pending', summary: 'no answer from the minion recorded', at: null, source: 'record: last_observation = null' }
      : {
          step: 'answer',
          status: 'done',
          summary: `latest answer: ${answerText(observation)} (earlier answers are not kept)`,
          at: observation.at,
          source: 'record: last_observation (a status poll or an event-stream return)',
        },
  );

  if (r.state === 'reconciled' && r.reconciliation !== null) {
    const before = r.reason === null ? '' : `; before it: ${reasonText(r.reason)}`;
    entries.push({
      step: 'outcome',
      status: 'done',
      summary: `reconciled by ${r.reconciliation.actor}: “${r.reconciliation.reason}”${before}`,
      at: r.reconciliation.at,
      source: 'record: reconciliation',
    });
  } else if (r.state === 'rejected') {
    entries.push({ step: 'outcome', status: 'done', summary: `rejected: ${r.reason === null ? 'no reason recorded' : reasonText(r.reason)}`, at: r.updated_at, source: 'record: reason, updated_at' });
  } else {
    const summary = OUTCOME_SUMMARY[r.state];
    if (summary === undefined) {
      entries.push({ step: 'outcome', status: 'pending', summary: r.reason === null ? 'not settled yet' : `not settled yet: ${reasonText(r.reason)}`, at: null, source: 'record: state' });
    } else {
      const why = r.reason !== null && (r.state === 'unknown' || r.state === 'quarantined') ? ` (${reasonText(r.reason)})` : '';
      entries.push({
        step: 'outcome',
        status: 'done',
        summary: `${summary(r)}${why}`,
        // A settled record is never written again, and neither is an unknown or quarantined one but by a reconciliation.
        at: r.updated_at,
        source: r.state === 'succeeded' || r.state === 'failed' ? 'the minion’s receipt, bound to this request, JID, profile and digest; record: updated_at' : 'record: reason, updated_at',
      });
    }
  }
  return entries;
}

const SOURCE_TEXT: Readonly<Record<HistorySource, string>> = {
  admission: 'an HTTP admission',
  dispatch: 'the CLI’s dispatch',
  rollout: 'a rollout',
  relay: 'the outbox relay',
  poller: 'a status poll',
  event_stream: 'salt-api’s event stream',
  reconcile: 'an operator’s reconciliation',
};

const PUBLICATION_EVENTS = new Set<HistoryEntry['event']>(['publish_acked', 'publish_uncertain', 'publish_not_sent']);
const ANSWER_EVENTS = new Set<HistoryEntry['event']>(['observed', 'minion_error', 'poll_failed']);

function findLast<T>(items: readonly T[], holds: (item: T) => boolean): T | undefined {
  for (let i = items.length - 1; i >= 0; i -= 1) {
    const item = items[i] as T;
    if (holds(item)) return item;
  }
  return undefined;
}

/** The history entry that is the evidence of each step that happened; none for a step the history does not show. */
function evidenceOf(r: ProtocolRequestRecord, entries: readonly HistoryEntry[]): Record<TimelineStep, HistoryEntry | undefined> {
  const intent = findLast(entries, (e) => e.event === 'intent_recorded');
  const afterIntent = intent === undefined ? [] : entries.filter((e) => e.seq > intent.seq);
  // The acknowledgement (or its failure); or, when an answer overtook it, the entry that moved the request out of publishing.
  const publication = afterIntent.find((e) => PUBLICATION_EVENTS.has(e.event)) ?? afterIntent.find((e) => e.from_state === 'publishing' && e.to_state !== 'publishing');
  const settledBy = findLast(entries, (e) => e.to_state === r.state && e.from_state !== r.state);
  return {
    prepared: entries.find((e) => e.event === 'created'),
    intent,
    publication,
    answer: findLast(entries, (e) => ANSWER_EVENTS.has(e.event)),
    outcome: settledBy,
  };
}

function answersIn(history: RequestHistory): string {
  const answers = history.entries.filter((e) => ANSWER_EVENTS.has(e.event));
  const bySource = new Map<HistorySource, number>();
  for (const e of answers) bySource.set(e.source, (bySource.get(e.source) ?? 0) + 1);
  const parts = [...bySource].map(([source, n]) => `${n} from ${SOURCE_TEXT[source]}`);
  const dropped = history.dropped === 0 ? '' : `, and ${history.dropped} changes the history let go`;
  return `${answers.length} answer(s) in the history${parts.length === 0 ? '' : ` (${parts.join(', ')})`}${dropped}`;
}

/**
 * The record's timeline with the history's evidence: each step the history
 * recorded gets its entry's time and source; a step it does not show (not
 * reached, or not kept before an upgrade) keeps the record's view.
 */
export function withHistory(r: ProtocolRequestRecord, history: RequestHistory): TimelineEntry[] {
  const base = timelineOf(r);
  if (history.entries.length === 0) return base;
  const evidence = evidenceOf(r, history.entries);
  return base.map((step) => {
    const entry = step.status === 'done' || step.status === 'uncertain' || step.step === 'publication' ? evidence[step.step] : undefined;
    if (entry === undefined) return step;
    const summary = step.step === 'answer' ? `${step.summary.replace(' (earlier answers are not kept)', '')}; ${answersIn(history)}` : step.summary;
    return { ...step, summary, at: entry.at, source: `history #${entry.seq}: ${SOURCE_TEXT[entry.source]} (${entry.event})`, evidence: 'history' };
  });
}

/** The receipt a settled record rests on, in canonical JSON, exactly as the minion commits it (nine keys). */
export function receiptOf(r: ProtocolRequestRecord): RequestPage['receipt'] {
  const status = r.state === 'succeeded' || r.state === 'failed' ? r.state : r.last_observation !== null && 'status' in r.last_observation && r.last_observation.status === 'unknown' ? 'unknown' : null;
  if (status === null) return null;
  const receipt = ReceiptSchema.parse({
    protocol: 1,
    minion_id: r.minion_id,
    request_id: r.request_id,
    jid: r.jid,
    profile: r.profile,
    state_digest: r.state_digest,
    status,
    passed: r.passed,
    total: r.total,
  });
  return { kind: status === 'unknown' ? 'status_answer' : 'receipt', canonical: canonicalJson(receipt) };
}
