import { isProtocolRecord, stateDigest, type HistorySource, type RequestRecord, type TransportFailure } from '@oduflow/protocol';
import { checkCapability, type CapabilityCheck } from './capability.js';
import { resolveDeps, type MasterDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { publishPrepared } from './publish.js';

/*
 * Publishes requests left `prepared`: by a crash after the record was
 * persisted (P1) or by a publication that provably sent nothing. The same JID
 * is used; the intent is committed first, so each goes out at most once more.
 * It never touches `publishing` or later records: those may be out already.
 * Kept apart from poll on purpose: polling never publishes.
 */

export interface PublishPendingOptions {
  /** Only this request. Without it, every prepared record that can be published. */
  readonly requestId?: string;
  /** The high data of a `custom` request; its digest must equal the record's. State data is never stored. */
  readonly stateDataJson?: string;
  /** Who publishes, for the request's history: the CLI (default) or a rollout. */
  readonly source?: Extract<HistorySource, 'dispatch' | 'rollout'>;
}

/** Why publish-pending left a prepared request as it was. */
export type PendingSkip =
  /** A custom request needs its state data (never stored) and `requestId`. */
  | 'state_data_required'
  /** Another worker recorded the intent first and publishes it. */
  | 'already_publishing'
  /** The minion's capability answer rules publication out (the request stays prepared for an operator). */
  | 'capability_missing'
  | 'capability_unsupported'
  | 'not_ready'
  /** The capability call got no answer, or no accepted key matched: try again later. */
  | 'unreachable'
  | 'no_target';

export type PendingResult =
  | { readonly outcome: 'published'; readonly record: RequestRecord }
  | { readonly outcome: 'publish_uncertain' | 'not_sent'; readonly record: RequestRecord; readonly failure: TransportFailure }
  | { readonly outcome: 'skipped'; readonly record: RequestRecord; readonly skip: PendingSkip };

function skipped(record: RequestRecord, skip: PendingSkip): PendingResult {
  return { outcome: 'skipped', record, skip };
}

function skipFor(check: Exclude<CapabilityCheck, { kind: 'ready' }>): PendingSkip {
  return check.kind === 'rejected' ? check.rejection.code : check.kind;
}

function digestOf(text: string): string | undefined {
  try {
    return stateDigest(text);
  } catch {
    return undefined;
  }
}

export async function publishPending(deps: MasterDeps, options: PublishPendingOptions = {}): Promise<PendingResult[]> {
  const d = resolveDeps(deps);
  let candidates: RequestRecord[];
  if (options.requestId !== undefined) {
    const record = await d.store.get(options.requestId);
    if (record === undefined) throw new MasterRunnerError('not_found', 'no record with that request id');
    if (record.state !== 'prepared') {
      throw new MasterRunnerError('illegal_transition', `only a prepared request can be published; this one is ${record.state}`, {
        requestId: record.request_id,
        detail: record.state,
      });
    }
    candidates = [record];
  } else {
    candidates = await d.store.list({ states: ['prepared'] });
  }

  const results: PendingResult[] = [];
  for (const record of candidates) {
    if (!isProtocolRecord(record)) continue;
    let text = '';
    if (record.profile === 'custom') {
      if (options.stateDataJson === undefined || options.requestId === undefined) {
        results.push(skipped(record, 'state_data_required'));
        continue;
      }
      if (digestOf(options.stateDataJson) !== record.state_digest) {
        throw new MasterRunnerError('invalid_input', 'the state data does not match the digest this request was recorded with', {
          requestId: record.request_id,
          detail: 'binding_conflict',
        });
      }
      text = options.stateDataJson;
    }
    // The minion may have changed since the record was made: prove the capability again.
    const capability = await checkCapability(d, record.minion_id);
    if (capability.kind !== 'ready') {
      results.push(skipped(record, skipFor(capability)));
      continue;
    }
    const published = await publishPrepared(d, record, text, options.source ?? 'dispatch');
    // Another worker recorded the intent first: it publishes, this one did not.
    results.push(published.outcome === 'already_publishing' ? skipped(published.record, 'already_publishing') : published);
  }
  return results;
}
