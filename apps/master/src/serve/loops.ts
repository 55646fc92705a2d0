import {
  MasterRunnerError,
  startEventRecorder,
  startOutboxRelay,
  startPoller,
  type Logger,
  type MasterDeps,
  type OutboxRelay,
  type SaltEventSource,
} from '@oduflow/master-runner';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceMetrics } from './metrics.js';

/*
 * The service's background work, on the master-runner library: the outbox
 * relay (publishes admitted requests once; each publication hands its
 * request to the poller), the poller (the recovery path), the event-stream
 * recorder (records returns as they arrive) and the expiry of old
 * Idempotency-Keys. One AbortSignal stops them all; `done` resolves once each
 * has finished the work in hand (a publication in flight is awaited and its
 * outcome recorded; a status call in flight is abandoned and records nothing).
 */

export interface LoopOptions {
  readonly signal: AbortSignal;
  readonly metrics: ServiceMetrics;
  readonly relayConcurrency: number;
  /** The outbox claim lease (ms); undefined: the relay's default. */
  readonly relayLeaseMs?: number;
  readonly pollConcurrency: number;
  readonly pollWalkEveryMs: number;
  /** The salt-api client's event stream; undefined: poll only. */
  readonly events: SaltEventSource | undefined;
  readonly keyRetentionMs: number;
  /** How often old keys are expired (default: hourly, or a quarter of the retention). */
  readonly keyExpiryEveryMs?: number;
}

export interface Loops {
  readonly relay: OutboxRelay;
  /** Resolves when every loop ended; rejects with the first loop that failed (the service then stops). */
  readonly done: Promise<void>;
  /** The first loop failure, as soon as it happens (never resolves otherwise). */
  readonly failed: Promise<{ readonly loop: string; readonly error: unknown }>;
}

function errorCode(error: unknown): string {
  return MasterRunnerError.isInstance(error) ? error.code : error instanceof Error ? error.name : typeof error;
}

async function expireKeysLoop(deps: MasterDeps & { logger: Logger }, options: LoopOptions): Promise<void> {
  const everyMs = options.keyExpiryEveryMs ?? Math.min(3_600_000, Math.floor(options.keyRetentionMs / 4));
  const now = deps.now ?? (() => new Date());
  while (!options.signal.aborted) {
    try {
      const forgotten = await deps.store.expireKeys(new Date(now().getTime() - options.keyRetentionMs));
      options.metrics.keysExpired(forgotten);
      if (forgotten > 0) deps.logger.info({ keys: forgotten }, 'idempotency keys past their retention forgotten');
    } catch (error) {
      // The next round tries again; the keys only stay longer than promised.
      deps.logger.error({ code: errorCode(error) }, 'idempotency keys could not be expired');
    }
    try {
      await sleep(everyMs, undefined, { signal: options.signal });
    } catch {
      return; // aborted
    }
  }
}

export function startLoops(deps: MasterDeps & { logger: Logger }, options: LoopOptions): Loops {
  const { signal, metrics } = options;
  const poller = startPoller(deps, {
    signal,
    concurrency: options.pollConcurrency,
    walkEveryMs: options.pollWalkEveryMs,
    metrics: metrics.poller,
  });
  const relay = startOutboxRelay(deps, {
    signal,
    concurrency: options.relayConcurrency,
    ...(options.relayLeaseMs === undefined ? {} : { leaseMs: options.relayLeaseMs }),
    onPublished: (record) => poller.watch(record.request_id),
    metrics: { onPublication: (outcome) => metrics.publication(outcome) },
  });
  const recorder = options.events === undefined ? undefined : startEventRecorder(deps, { signal, source: options.events, metrics: metrics.events });
  const expiry = expireKeysLoop(deps, options);

  let reportFailure: (failure: { loop: string; error: unknown }) => void = () => undefined;
  const failed = new Promise<{ loop: string; error: unknown }>((resolve) => (reportFailure = resolve));
  const watched = (loop: string, done: Promise<void>): Promise<void> =>
    done.then(
      () => {
        // A loop that ends on its own, before the abort, has stopped working: the service must not go on without it.
        if (!signal.aborted) reportFailure({ loop, error: new MasterRunnerError('internal', `the ${loop} stopped`) });
      },
      (error: unknown) => {
        deps.logger.error({ loop, code: errorCode(error) }, 'a background loop failed');
        reportFailure({ loop, error });
        throw error;
      },
    );
  const all = [
    watched('outbox relay', relay.done),
    watched('poller', poller.done),
    ...(recorder === undefined ? [] : [watched('event recorder', recorder.done)]),
    watched('key expiry', expiry),
  ];
  const done = Promise.allSettled(all).then((results) => {
    const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (rejected !== undefined) throw rejected.reason;
  });
  done.catch(() => undefined); // observed by the service through `failed` and its stop()
  return { relay, done, failed };
}
