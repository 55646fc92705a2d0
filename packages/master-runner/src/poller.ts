import type { Observation, RequestRecord } from '@oduflow/protocol';
import { forEachConcurrently } from './concurrently.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { PollSchedule, type BackoffOptions } from './poll-schedule.js';
import { DEFAULT_POLL_CONCURRENCY, pollRecords, sweep, type PollResult, type SweepSummary } from './poll.js';

/*
 * The poller as a service loop (the recovery path: the event recorder
 * records most results the moment they arrive). Library only: no process,
 * no signals, no timers left behind; an AbortSignal stops it and `done`
 * resolves once the polls in flight are settled (a call in flight is
 * abandoned and records nothing; a commit is one unit and is never cut).
 *
 * Every `walkEveryMs` it walks the whole backlog (store.scan of the pollable
 * states, page by page), which finds new requests (polled at once) and drops
 * settled ones from the schedule. Between walks it polls only what the
 * schedule says is due, reading each of those records fresh by id, so a
 * backlog whose requests keep answering `running` costs one poll per request
 * per backoff interval, not one per walk. `watch(id)` puts a fresh
 * publication in the schedule at once (the service's publisher calls it).
 */

export interface PollerMetrics {
  /** One poll: committed (the record changed), unchanged, or error (a store failure); `observed` is the status, error code or failure seen. */
  onPoll?(outcome: 'committed' | 'unchanged' | 'error', observed: string | undefined): void;
  /** One walk over the whole backlog ended. */
  onSweep?(summary: SweepSummary, durationMs: number): void;
  /** Status calls in flight now. */
  onInFlight?(calls: number): void;
}

export interface PollerOptions extends BackoffOptions {
  readonly signal: AbortSignal;
  /** Status calls in flight at once (default 64). */
  readonly concurrency?: number;
  /** Status calls per salt-api exchange (default 1; see SweepOptions.batchSize). */
  readonly batchSize?: number;
  /** How often the whole backlog is walked (ms; default 30 000). */
  readonly walkEveryMs?: number;
  readonly metrics?: PollerMetrics;
}

export interface Poller {
  /** Resolves when the signal aborted and the polls in flight settled; rejects only if the store cannot be walked at all. */
  readonly done: Promise<void>;
  /** A request just published: poll it soon, without waiting for the next walk. */
  watch(requestId: string): void;
}

function observedLabel(observed: Observation | undefined): string | undefined {
  if (observed === undefined) return undefined;
  if ('status' in observed) return observed.status;
  return 'error' in observed ? observed.error : observed.failure;
}

export function startPoller(deps: MasterDeps, options: PollerOptions): Poller {
  const d = resolveDeps(deps);
  const concurrency = options.concurrency ?? DEFAULT_POLL_CONCURRENCY;
  if (!Number.isInteger(concurrency) || concurrency <= 0) throw new MasterRunnerError('invalid_input', 'the poll concurrency must be a positive integer');
  const walkEveryMs = options.walkEveryMs ?? 30_000;
  const schedule = new PollSchedule(options);
  const clock = (): number => d.now().getTime();
  let wake: (() => void) | undefined;
  let inFlight = 0;

  const record = (result: PollResult): void => {
    schedule.polled(result.record.request_id, result.observed, clock());
    if (result.outcome !== 'not_pollable') options.metrics?.onPoll?.(result.outcome, observedLabel(result.observed));
  };
  const failed = (error: unknown, requestId: string | undefined): void => {
    options.metrics?.onPoll?.('error', undefined);
    d.logger.error({ request_id: requestId, code: MasterRunnerError.isInstance(error) ? error.code : 'internal' }, 'a poll could not be recorded');
  };
  const tracked = async <T>(calls: number, work: () => Promise<T>): Promise<T> => {
    inFlight += calls;
    options.metrics?.onInFlight?.(inFlight);
    try {
      return await work();
    } finally {
      inFlight -= calls;
      options.metrics?.onInFlight?.(inFlight);
    }
  };

  const done = (async () => {
    let walk = 0;
    let nextWalkAtMs = clock();
    while (!options.signal.aborted) {
      if (clock() >= nextWalkAtMs) {
        walk += 1;
        await walkBacklog(walk);
        nextWalkAtMs = clock() + walkEveryMs;
      } else {
        await pollDue(d, schedule.due(clock()));
      }
      const nextDue = schedule.nextDueAtMs();
      await pause(Math.max(0, Math.min(nextWalkAtMs, nextDue ?? nextWalkAtMs) - clock()));
    }
  })();

  async function walkBacklog(walk: number): Promise<void> {
    const startedAt = clock();
    const summary = await sweep(deps, {
      concurrency,
      batchSize: options.batchSize ?? 1,
      signal: options.signal,
      due: (r) => schedule.seen(r.request_id, walk, clock()),
      onResult: record,
      onError: (error, r) => failed(error, r.request_id),
      onCalls: (delta) => {
        inFlight += delta;
        options.metrics?.onInFlight?.(inFlight);
      },
    });
    // An aborted walk saw only part of the backlog: pruning would forget live requests.
    if (!options.signal.aborted) schedule.pruneUnseen(walk);
    options.metrics?.onSweep?.(summary, clock() - startedAt);
  }

  async function pollDue(resolved: ResolvedDeps, ids: readonly string[]): Promise<void> {
    await forEachConcurrently(ids, { concurrency, batchSize: options.batchSize ?? 1, signal: options.signal }, async (batch) => {
      try {
        const records = (await Promise.all(batch.map((id) => resolved.store.get(id)))).filter((r): r is RequestRecord => r !== undefined);
        for (const id of batch) if (!records.some((r) => r.request_id === id)) schedule.forget(id);
        const results = await tracked(records.length, () => pollRecords(resolved, records, { signal: options.signal }));
        for (const result of results) {
          if (result === undefined) continue;
          if (result.outcome === 'not_pollable') schedule.forget(result.record.request_id);
          else record(result);
        }
      } catch (error) {
        failed(error, batch[0]);
      }
    });
  }

  /** Waits `ms`, or less when the signal aborts or watch() wakes the loop. */
  function pause(ms: number): Promise<void> {
    if (options.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        options.signal.removeEventListener('abort', finish);
        wake = undefined;
        resolve();
      };
      const timer = setTimeout(finish, ms);
      options.signal.addEventListener('abort', finish, { once: true });
      wake = finish;
    });
  }

  return {
    done,
    watch(requestId) {
      schedule.seen(requestId, 0, clock()); // a new entry is due now; the next walk re-stamps it
      wake?.();
    },
  };
}
