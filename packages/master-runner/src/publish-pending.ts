import { isProtocolRecord, stateDigest, type RequestRecord } from '@oduflow/protocol';
import { checkCapability } from './capability.js';
import { resolveDeps, type MasterDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { publishPrepared, type PublishResultKind } from './publish.js';

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
}

export interface PendingResult {
  readonly outcome: Exclude<PublishResultKind, 'already_publishing'> | 'skipped';
  readonly record: RequestRecord;
  readonly reason?: string;
}

function skipped(record: RequestRecord, reason: string): PendingResult {
  return { outcome: 'skipped', record, reason };
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
    if (!capability.ok) {
      results.push(skipped(record, capability.reason));
      continue;
    }
    const published = await publishPrepared(d, record, text);
    // Another worker recorded the intent first: it publishes, this one did not.
    if (published.outcome === 'already_publishing') results.push(skipped(published.record, 'already_publishing'));
    else results.push({ ...published, outcome: published.outcome });
  }
  return results;
}
