import { ProtocolError, applyEvent, isProtocolRecord, type HistorySource, type RequestEvent, type RequestRecord } from '@oduflow/protocol';
import type { ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import type { UpdateOutcome } from './record-store.js';

export interface CommitOptions {
  /** Which part of the master commits the event: its history entry says so. */
  readonly source: HistorySource;
  /**
   * Keep the stored record when the event no longer applies to it: another
   * worker moved the request on between our network call and this commit
   * (a poll racing a publication, or an operator's reconciliation).
   */
  readonly stale?: 'keep' | 'refuse';
  /**
   * 'skip': keep the stored record when the event would change nothing but
   * the time of its last observation (the same poll answer seen again; see
   * poll.ts). Default 'write'.
   */
  readonly repeat?: 'skip' | 'write';
}

/** Two flat objects (a reason, an observation) with the same fields but `ignored`, in any key order. */
function sameFields(a: object | null, b: object | null, ignored?: string): boolean {
  if (a === null || b === null) return a === b;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x).filter((k) => k !== ignored);
  return (
    keys.length === Object.keys(y).filter((k) => k !== ignored).length &&
    keys.every((k) => Object.hasOwn(y, k) && JSON.stringify(x[k]) === JSON.stringify(y[k]))
  );
}

/**
 * `after` is `before` observed again: it differs only in `updated_at` and
 * `last_observation.at`. A poll event touches only the state, the counts,
 * the reason and the observation (transitions.ts), so those are compared.
 */
export function onlyObservedAgain(before: RequestRecord, after: RequestRecord): boolean {
  if (before === after) return true;
  if (!isProtocolRecord(before) || !isProtocolRecord(after) || before.last_observation === null || after.last_observation === null) return false;
  return (
    before.state === after.state &&
    before.passed === after.passed &&
    before.total === after.total &&
    before.publish_attempts === after.publish_attempts &&
    before.reconciliation === after.reconciliation &&
    sameFields(before.reason, after.reason) &&
    sameFields(before.last_observation, after.last_observation, 'at')
  );
}

/** One atomic unit: under the request lock, apply `event` to the stored record and write the result. */
export async function commitEvent(
  deps: ResolvedDeps,
  requestId: string,
  event: RequestEvent,
  options: CommitOptions,
): Promise<UpdateOutcome> {
  const outcome = await deps.store.updateRequest(requestId, (current: RequestRecord) => {
    try {
      const next = applyEvent(current, event);
      return options.repeat === 'skip' && onlyObservedAgain(current, next) ? current : next;
    } catch (error) {
      if (ProtocolError.isInstance(error) && error.code === 'illegal_transition') {
        if (options.stale === 'keep') return current;
        throw new MasterRunnerError('illegal_transition', error.message, { detail: error.code, requestId, cause: error });
      }
      throw error;
    }
  }, { event: event.type, source: options.source });
  const { after } = outcome;
  deps.logger.info(
    { request_id: after.request_id, minion_id: after.minion_id, jid: after.jid, state: after.state, event: event.type, changed: outcome.changed },
    outcome.changed ? 'request record updated' : 'request record kept',
  );
  return outcome;
}

export function nowIso(deps: ResolvedDeps): string {
  return deps.now().toISOString();
}
