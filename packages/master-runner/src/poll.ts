import {
  ProtocolError,
  POLLABLE_STATES,
  isPollable,
  isProtocolRecord,
  parseErrorAnswer,
  parseStatusAnswer,
  observationOf,
  type Observation,
  type ProtocolRequestRecord,
  type RequestEventOf,
  type RequestRecord,
} from '@oduflow/protocol';
import { commitEvent, nowIso } from './commit.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { isPlainObject } from './plain-object.js';
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
  /** What this poll saw (a status, an error code, or why nothing usable came back); absent when the minion was not asked. */
  readonly observed?: Observation;
}

/** The events a poll can produce. */
type PollEvent = RequestEventOf<'observed' | 'minion_error' | 'poll_failed'>;

function bindingOf(record: ProtocolRequestRecord) {
  return {
    minion_id: record.minion_id,
    request_id: record.request_id,
    jid: record.jid,
    profile: record.profile,
    state_digest: record.state_digest,
  };
}

/** An error answer carries its code, known to this master or not; one that is not well-formed names no code. */
function errorEvent(ret: Record<string, unknown>, at: string): PollEvent {
  try {
    return { type: 'minion_error', at, error: parseErrorAnswer(ret).error };
  } catch {
    return { type: 'poll_failed', at, failure: 'invalid_error_answer' };
  }
}

/** What the minion's return says, validated against the record's exact binding. */
function answerEvent(record: ProtocolRequestRecord, retcode: number, ret: unknown, at: string): PollEvent {
  if (isPlainObject(ret) && Object.hasOwn(ret, 'error')) return errorEvent(ret, at);
  // A status answer comes with retcode 0; a refusal may come with 1 (as `run` answers it).
  const refusal = isPlainObject(ret) && ret['status'] === 'refused';
  if (retcode !== 0 && !refusal) return { type: 'poll_failed', at, failure: 'not_a_protocol_answer' };
  try {
    return { type: 'observed', at, answer: parseStatusAnswer(ret, bindingOf(record)) };
  } catch (error) {
    if (!ProtocolError.isInstance(error)) throw error;
    return { type: 'poll_failed', at, failure: error.code === 'binding_conflict' ? 'answer_binding_conflict' : 'invalid_status_answer' };
  }
}

/** Turns what Salt returned into the one event the state machine understands. */
export function statusEvent(record: ProtocolRequestRecord, outcome: CallOutcome, at: string): PollEvent {
  switch (outcome.kind) {
    case 'no_return':
    case 'no_target':
      return { type: 'poll_failed', at, failure: outcome.kind };
    case 'failed':
      return { type: 'poll_failed', at, failure: outcome.reason };
    case 'returned':
      return answerEvent(record, outcome.retcode, outcome.ret, at);
  }
}

async function pollRecord(d: ResolvedDeps, record: RequestRecord): Promise<PollResult> {
  if (!isProtocolRecord(record) || !isPollable(record)) return { outcome: 'not_pollable', record };
  const args = [record.request_id, record.jid, record.profile, record.state_digest];
  const answer = await d.salt.call(record.minion_id, 'oduflow_job.status', args, d.callTimeoutMs);
  const event = statusEvent(record, answer, nowIso(d));
  d.crashAt('P4');
  const committed = await commitEvent(d, record.request_id, event, { stale: 'keep' });
  return { outcome: committed.changed ? 'committed' : 'unchanged', record: committed.after, observed: observationOf(event) };
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
