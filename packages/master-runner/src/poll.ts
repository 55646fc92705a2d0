import {
  ProtocolError,
  POLLABLE_STATES,
  isPollable,
  isProtocolRecord,
  parseErrorAnswer,
  parseStatusAnswer,
  type ProtocolRequestRecord,
  type RequestEvent,
  type RequestRecord,
} from '@oduflow/protocol';
import { commitEvent, nowIso } from './commit.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import type { CallOutcome } from './salt-client.js';

/*
 * Polling asks `oduflow_job.status` on exactly the record's minion, with the
 * record's exact binding, OUTSIDE any lock (a slow minion must not hold up
 * other workers), validates the complete answer, and then commits in one unit
 * under the request lock. The commit goes through applyEvent on the record as
 * stored at that moment, so a terminal result another worker committed in
 * between is kept, never overwritten.
 */

export type PollOutcome =
  /** The answer changed the record. */
  | 'committed'
  /** The answer was absorbed (nothing new, or the record had moved on). */
  | 'unchanged'
  /** The record is not waiting for a status (prepared, settled or legacy): the minion was not asked. */
  | 'not_pollable';

export interface PollResult {
  readonly outcome: PollOutcome;
  readonly record: RequestRecord;
  /** What the minion said (`running`, `succeeded`…) or why nothing usable came back. */
  readonly observed?: string;
}

function bindingOf(record: ProtocolRequestRecord) {
  return {
    minion_id: record.minion_id,
    request_id: record.request_id,
    jid: record.jid,
    profile: record.profile,
    state_digest: record.state_digest,
  };
}

function errorAnswerEvent(ret: unknown, at: string): RequestEvent | undefined {
  try {
    const answer = parseErrorAnswer(ret);
    return answer.error === 'binding_conflict'
      ? { type: 'conflict', at, reason: 'minion_binding_conflict' }
      : { type: 'poll_failed', at, reason: `minion_error_${answer.error}` };
  } catch {
    return undefined;
  }
}

/** Turns what Salt returned into the one event the state machine understands. */
export function statusEvent(record: ProtocolRequestRecord, outcome: CallOutcome, at: string): RequestEvent {
  switch (outcome.kind) {
    case 'no_return':
      return { type: 'poll_failed', at, reason: 'status_no_return' };
    case 'no_target':
      return { type: 'poll_failed', at, reason: 'status_no_target' };
    case 'failed':
      return { type: 'poll_failed', at, reason: `status_${outcome.reason}` };
    case 'returned': {
      const refusal = errorAnswerEvent(outcome.ret, at);
      if (refusal !== undefined) return refusal;
      if (outcome.retcode !== 0) return { type: 'poll_failed', at, reason: 'status_not_a_protocol_answer' };
      try {
        return { type: 'observed', at, answer: parseStatusAnswer(outcome.ret, bindingOf(record)) };
      } catch (error) {
        if (ProtocolError.isInstance(error) && error.code === 'binding_conflict') {
          return { type: 'conflict', at, reason: 'answer_binding_conflict' };
        }
        if (ProtocolError.isInstance(error)) return { type: 'poll_failed', at, reason: `status_${error.code}` };
        throw error;
      }
    }
  }
}

function observedLabel(event: RequestEvent): string {
  switch (event.type) {
    case 'observed':
      return event.answer.status;
    case 'conflict':
    case 'poll_failed':
      return event.reason;
    default:
      return event.type;
  }
}

async function pollRecord(d: ResolvedDeps, record: RequestRecord): Promise<PollResult> {
  if (!isProtocolRecord(record) || !isPollable(record)) return { outcome: 'not_pollable', record };
  const args = [record.request_id, record.jid, record.profile, record.state_digest];
  const answer = await d.salt.call(record.minion_id, 'oduflow_job.status', args, d.callTimeoutMs);
  const event = statusEvent(record, answer, nowIso(d));
  d.crashAt('P4');
  const committed = await commitEvent(d, record.request_id, event, { stale: 'keep' });
  return { outcome: committed.changed ? 'committed' : 'unchanged', record: committed.after, observed: observedLabel(event) };
}

/** Polls one request. Throws `not_found` for an unknown id; every Salt outcome is a result. */
export async function poll(deps: MasterDeps, requestId: string): Promise<PollResult> {
  const d = resolveDeps(deps);
  const record = await d.store.get(requestId);
  if (record === undefined) throw new MasterRunnerError('not_found', 'no record with that request id');
  return pollRecord(d, record);
}

/** Polls every request that is waiting for a status, one after another. */
export async function pollAll(deps: MasterDeps, filter: { readonly minionId?: string } = {}): Promise<PollResult[]> {
  const d = resolveDeps(deps);
  const waiting = await d.store.list({ ...filter, states: POLLABLE_STATES });
  const results: PollResult[] = [];
  for (const record of waiting) results.push(await pollRecord(d, record));
  return results;
}
