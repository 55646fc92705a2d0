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

function statusArgs(record: ProtocolRequestRecord): string[] {
  return [record.request_id, record.jid, record.profile, record.state_digest];
}

/** The minions' answers for `records`, in one salt-api exchange when there are several and the client can. */
async function askStatus(d: ResolvedDeps, records: readonly ProtocolRequestRecord[], signal: AbortSignal | undefined): Promise<CallOutcome[]> {
  const options = signal === undefined ? {} : { signal };
  if (records.length > 1 && d.salt.callMany !== undefined) {
    const calls = records.map((r) => ({ minionId: r.minion_id, fun: 'oduflow_job.status', args: statusArgs(r) }));
    return d.salt.callMany(calls, d.callTimeoutMs, options);
  }
  return Promise.all(records.map((r) => d.salt.call(r.minion_id, 'oduflow_job.status', statusArgs(r), d.callTimeoutMs, options)));
}

/** Records what the minion answered about `record` (read before the call). Undefined when the call was abandoned. */
async function settle(d: ResolvedDeps, record: ProtocolRequestRecord, answer: CallOutcome, signal: AbortSignal | undefined): Promise<PollResult | undefined> {
  if (answer.kind === 'failed' && signal?.aborted === true) return undefined;
  const event = statusEvent(record, answer, nowIso(d));
  d.crashAt('P4');
  const observed = observationOf(event);
  // The same answer as the record holds: nothing to write, no lock to take.
  if (onlyObservedAgain(record, appliedOrKept(record, event))) return { outcome: 'unchanged', record, observed };
  const committed = await commitEvent(d, record.request_id, event, { stale: 'keep', repeat: 'skip', source: 'poller' });
  return { outcome: committed.changed ? 'committed' : 'unchanged', record: committed.after, observed };
}

/**
 * Polls records as read from the store (several in one salt-api exchange
 * when the client offers callMany). A result per record, in order; undefined
 * for a call abandoned because `signal` aborted (nothing is recorded then).
 */
export async function pollRecords(d: ResolvedDeps, records: readonly RequestRecord[], options: PollRecordOptions = {}): Promise<(PollResult | undefined)[]> {
  const pollable = records.filter((r): r is ProtocolRequestRecord => isProtocolRecord(r) && isPollable(r));
  const answers = await askStatus(d, pollable, options.signal);
  const settled = new Map<RequestRecord, Promise<PollResult | undefined>>(
    pollable.map((record, i) => [record, settle(d, record, answers[i] as CallOutcome, options.signal)]),
  );
  return Promise.all(records.map((record) => settled.get(record) ?? Promise.resolve<PollResult>({ outcome: 'not_pollable', record })));
}

/** Polls one request. Throws `not_found` for an unknown id; every Salt outcome is a result. */
export async function poll(deps: MasterDeps, requestId: string): Promise<PollResult> {
  const d = resolveDeps(deps);
  const record = await d.store.get(requestId);
  if (record === undefined) throw new MasterRunnerError('not_found', 'no record with that request id');
  const [result] = await pollRecords(d, [record]);
  return result as PollResult;
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
  /**
   * Status calls sent in one salt-api exchange (default 1). salt-api runs the
   * calls of one exchange one after another, so a batch costs the sum of its
   * calls' round trips (a stopped minion delays the others in its batch), but
   * the master pays one HTTP exchange per batch: bench/poll-sweep.ts.
   */
  readonly batchSize?: number;
  /** Status calls starting (+n) and ending (−n), for an in-flight gauge. */
  readonly onCalls?: (delta: number) => void;
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
  const batchSize = options.batchSize ?? 1;
  const due = options.due;
  await forEachConcurrently(
    pages,
    {
      concurrency,
      batchSize,
      accept: (record) => {
        counts.seen += 1;
        return due === undefined || due(record);
      },
      ...(signal === undefined ? {} : { signal }),
    },
    async (batch) => {
      let results: (PollResult | undefined)[];
      options.onCalls?.(batch.length);
      try {
        results = await pollRecords(d, batch, signal === undefined ? {} : { signal });
      } catch (error) {
        // A store failure in one commit: the batch's other commits may have landed; the next sweep sees.
        counts.errors += 1;
        if (options.onError !== undefined) options.onError(error, batch[0] as RequestRecord);
        else firstError ??= { error };
        return;
      } finally {
        options.onCalls?.(-batch.length);
      }
      for (const result of results) {
        if (result === undefined || result.outcome === 'not_pollable') continue;
        counts.polled += 1;
        counts[result.outcome] += 1;
        options.onResult?.(result);
      }
    },
  );
  if (firstError !== undefined) throw firstError.error;
  return counts;
}

/** Polls every request that is waiting for a status (up to 64 at once); the results in request-id order. */
export async function pollAll(
  deps: MasterDeps,
  filter: { readonly minionId?: string; readonly concurrency?: number; readonly batchSize?: number } = {},
): Promise<PollResult[]> {
  const results: PollResult[] = [];
  await sweep(deps, { ...filter, onResult: (result) => results.push(result) });
  return results.sort((a, b) => (a.record.request_id < b.record.request_id ? -1 : a.record.request_id > b.record.request_id ? 1 : 0));
}
