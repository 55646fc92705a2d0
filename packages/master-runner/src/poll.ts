import {
  ProtocolError,
  POLLABLE_STATES,
  applyEvent,
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
import { commitEvent, nowIso, onlyObservedAgain } from './commit.js';
import { forEachConcurrently } from './concurrently.js';
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
 *
 * An answer that says what the record already says (the same status, error
 * or failure, seen again later) is not written: at fleet scale a write and an
 * fsync per poll of an unchanged answer is waste, and the time of the latest
 * poll lives in the poller (PollResult.observed.at, metrics). The check runs
 * first on the record as read before the call (no lock, no I/O when nothing
 * changed) and again under the lock (commitEvent's `repeat: 'skip'`). So
 * `last_observation` is when the minion's answer last CHANGED; an answer that
 * appears for the first time, an error included, is always written.
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

/** What a poll does besides asking: an abort signal for the call. */
export interface PollRecordOptions {
  readonly signal?: AbortSignal;
}

/** `event` applied to `record`, or `record` when the event no longer applies to it. */
function appliedOrKept(record: RequestRecord, event: PollEvent): RequestRecord {
  try {
    return applyEvent(record, event);
  } catch (error) {
    if (ProtocolError.isInstance(error) && error.code === 'illegal_transition') return record;
    throw error;
  }
}

/**
 * Polls one record as read from the store. Undefined when the call was
 * abandoned because `signal` aborted (nothing is recorded then).
 */
export async function pollRecord(d: ResolvedDeps, record: RequestRecord, options: PollRecordOptions = {}): Promise<PollResult | undefined> {
  if (!isProtocolRecord(record) || !isPollable(record)) return { outcome: 'not_pollable', record };
  const args = [record.request_id, record.jid, record.profile, record.state_digest];
  const answer = await d.salt.call(record.minion_id, 'oduflow_job.status', args, d.callTimeoutMs, options.signal === undefined ? {} : { signal: options.signal });
  if (answer.kind === 'failed' && options.signal?.aborted === true) return undefined;
  const event = statusEvent(record, answer, nowIso(d));
  d.crashAt('P4');
  const observed = observationOf(event);
  // The same answer as the record holds: nothing to write, no lock to take.
  if (onlyObservedAgain(record, appliedOrKept(record, event))) return { outcome: 'unchanged', record, observed };
  const committed = await commitEvent(d, record.request_id, event, { stale: 'keep', repeat: 'skip' });
  return { outcome: committed.changed ? 'committed' : 'unchanged', record: committed.after, observed };
}

/** Polls one request. Throws `not_found` for an unknown id; every Salt outcome is a result. */
export async function poll(deps: MasterDeps, requestId: string): Promise<PollResult> {
  const d = resolveDeps(deps);
  const record = await d.store.get(requestId);
  if (record === undefined) throw new MasterRunnerError('not_found', 'no record with that request id');
  return (await pollRecord(d, record)) as PollResult;
}

export const DEFAULT_POLL_CONCURRENCY = 64;

export interface SweepOptions {
  /** Status calls in flight at once (default 64). */
  readonly concurrency?: number;
  /** Only this target's requests. */
  readonly minionId?: string;
  /** Stops taking new records; calls in flight are abandoned, nothing half-written. */
  readonly signal?: AbortSignal;
  /** Whether to poll this record now (a schedule); default: every record. */
  readonly due?: (record: RequestRecord) => boolean;
  /** Every poll's result, as it completes. */
  readonly onResult?: (result: PollResult) => void;
  /** A poll that threw (a store failure); the sweep goes on. Default: the sweep rethrows the first one at its end. */
  readonly onError?: (error: unknown, record: RequestRecord) => void;
  /** Records read from the store per page (default 256). */
  readonly pageSize?: number;
}

export interface SweepSummary {
  /** Records the walk saw (pollable states). */
  readonly seen: number;
  /** Status calls made and answered (committed + unchanged). */
  readonly polled: number;
  readonly committed: number;
  readonly unchanged: number;
  /** Polls that threw (store failures). */
  readonly errors: number;
}

/**
 * One walk over every request waiting for a status, paging through the
 * store (never every record in memory) and polling up to `concurrency` at
 * once. Each poll is independent: its network call holds no lock, its commit
 * is one unit.
 */
export async function sweep(deps: MasterDeps, options: SweepOptions = {}): Promise<SweepSummary> {
  const d = resolveDeps(deps);
  const concurrency = options.concurrency ?? DEFAULT_POLL_CONCURRENCY;
  if (!Number.isInteger(concurrency) || concurrency <= 0) throw new MasterRunnerError('invalid_input', 'the poll concurrency must be a positive integer');
  const filter = options.minionId === undefined ? { states: POLLABLE_STATES } : { states: POLLABLE_STATES, minionId: options.minionId };
  const pages = d.store.scan(filter, options.pageSize === undefined ? {} : { pageSize: options.pageSize });
  const counts = { seen: 0, polled: 0, committed: 0, unchanged: 0, errors: 0 };
  let firstError: { error: unknown } | undefined;
  const signal = options.signal;
  await forEachConcurrently(
    pages,
    concurrency,
    async (record) => {
      counts.seen += 1;
      if (options.due !== undefined && !options.due(record)) return;
      try {
        const result = await pollRecord(d, record, signal === undefined ? {} : { signal });
        if (result === undefined || result.outcome === 'not_pollable') return;
        counts.polled += 1;
        counts[result.outcome] += 1;
        options.onResult?.(result);
      } catch (error) {
        counts.errors += 1;
        if (options.onError !== undefined) options.onError(error, record);
        else firstError ??= { error };
      }
    },
    signal,
  );
  if (firstError !== undefined) throw firstError.error;
  return counts;
}

/** Polls every request that is waiting for a status (up to 64 at once); the results in request-id order. */
export async function pollAll(deps: MasterDeps, filter: { readonly minionId?: string; readonly concurrency?: number } = {}): Promise<PollResult[]> {
  const results: PollResult[] = [];
  await sweep(deps, { ...filter, onResult: (result) => results.push(result) });
  return results.sort((a, b) => (a.record.request_id < b.record.request_id ? -1 : a.record.request_id > b.record.request_id ? 1 : 0));
}
