import { isProtocolRecord, type HistorySource, type ProtocolRequestRecord, type RequestEvent, type RequestRecord, type TransportFailure } from '@oduflow/protocol';
import { commitEvent, nowIso } from './commit.js';
import type { ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import type { PublishOutcome } from './salt-client.js';

/** What happened to one publication attempt. */
export type PublishResultKind =
  /** salt-api acknowledged it: the minion will run it once and keep a receipt. */
  | 'published'
  /** It may have gone out: it stays `publishing` and is only ever polled, never published again. */
  | 'publish_uncertain'
  /** Provably nothing left: back to `prepared` with the same JID, to be published later. */
  | 'not_sent'
  /**
   * The record had already left `prepared` when this call came to record its
   * intent (another worker recorded it first and publishes it, or an operator
   * reconciled it): this call published nothing. `record` is the current one.
   */
  | 'already_publishing';

export type PublishResult =
  | { readonly outcome: 'published'; readonly record: RequestRecord }
  | { readonly outcome: 'already_publishing'; readonly record: RequestRecord }
  /** `failure`: how the publish call failed. */
  | { readonly outcome: Extract<PublishResultKind, 'publish_uncertain' | 'not_sent'>; readonly record: RequestRecord; readonly failure: TransportFailure };

function eventFor(outcome: PublishOutcome, at: string): RequestEvent {
  switch (outcome.kind) {
    case 'acked':
      return { type: 'publish_acked', at };
    case 'not_sent':
      return { type: 'publish_not_sent', at, failure: outcome.reason };
    case 'uncertain':
      return { type: 'publish_uncertain', at, failure: outcome.reason };
  }
}

/**
 * Publishes a `prepared` record exactly once: the intent is committed first
 * (so a crash or a lost acknowledgement can never authorize a second
 * publication), then salt-api is called once, then its outcome is recorded.
 * `stateDataJson` must be the text whose digest the record carries;
 * `source` is who publishes (the CLI's dispatch or the service's relay).
 */
export async function publishPrepared(
  deps: ResolvedDeps,
  record: ProtocolRequestRecord,
  stateDataJson: string,
  source: HistorySource,
): Promise<PublishResult> {
  // Under the request lock: only a record still `prepared` takes the intent.
  // Otherwise another worker (or an operator) moved it on: publish nothing.
  const intent = await commitEvent(deps, record.request_id, { type: 'intent_recorded', at: nowIso(deps) }, { stale: 'keep', source });
  if (!intent.changed) return { outcome: 'already_publishing', record: intent.after };
  const publishing = intent.after;
  if (!isProtocolRecord(publishing)) throw new MasterRunnerError('internal', 'a legacy record reached publication');
  deps.crashAt('P2');

  const outcome = await deps.salt.publish(publishing.minion_id, publishing.jid, 'oduflow_job.run', [
    publishing.request_id,
    publishing.profile,
    stateDataJson,
  ]);
  deps.crashAt('P3');

  const committed = await commitEvent(deps, publishing.request_id, eventFor(outcome, nowIso(deps)), { stale: 'keep', source });
  switch (outcome.kind) {
    case 'acked':
      return { outcome: 'published', record: committed.after };
    case 'not_sent':
      return { outcome: 'not_sent', record: committed.after, failure: outcome.reason };
    case 'uncertain':
      return { outcome: 'publish_uncertain', record: committed.after, failure: outcome.reason };
  }
}
