import type { Logger, MasterDeps, RecordStore, SaltApiClient } from '@oduflow/master-runner';
import type { CrashPoint } from '@oduflow/master-runner/internal';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { trackConnections, type ConnectionDrain } from './connection-drain.js';
import type { ServiceContext } from './context.js';
import { defaultAssetsDir } from './dashboard/assets.js';
import { announcingStore, createChangeFeed } from './dashboard/change-feed.js';
import type { DashboardOptions } from './dashboard/dashboard-context.js';
import { startLoops, type Loops } from './loops.js';
import { createServiceMetrics, type ServiceMetrics } from './metrics.js';
import { createRolloutService, disabledRolloutService, type RolloutServiceOptions } from './rollout-service.js';
import type { TokenRegistry } from './tokens.js';

/*
 * One running service: the HTTP app on its socket and the background loops,
 * sharing one store and ONE salt-api client (its exchange gate keeps
 * publications apart from reads only within one client). The caller opens
 * and closes the store and the client; stop() drains in this order:
 *   1. readiness fails and new authenticated requests are refused (503);
 *   2. the listener closes and the requests in flight finish (an admission
 *      completes its unit, or stores nothing);
 *   3. the loops and the rollouts are aborted and their work in hand is
 *      finished (a publication in flight is awaited and recorded; a rollout
 *      writes no further checkpoint and is left interrupted, resumed at the
 *      next start);
 * so nothing is left half-written beyond what a crash would leave, and
 * every store write is atomic anyway.
 */

export interface ServiceOptions {
  readonly store: RecordStore;
  readonly salt: SaltApiClient;
  readonly logger: Logger;
  readonly callTimeoutMs: number;
  readonly tokens: () => TokenRegistry;
  readonly host: string;
  /** 0: any free port (tests, and the lead's multi-instance runs); the address is in `address`. */
  readonly port: number;
  readonly relayConcurrency: number;
  /** The outbox claim lease (ms; default: the relay's, 120 000). */
  readonly relayLeaseMs?: number;
  readonly pollConcurrency: number;
  readonly pollWalkEveryMs: number;
  readonly eventStream: boolean;
  readonly keyRetentionMs: number;
  readonly unboundLegacy: readonly string[];
  readonly now?: () => Date;
  /** The crash-test seam (tests' own entry only). */
  readonly crashAt?: (point: CrashPoint) => void;
  /** How long a readiness answer about salt-api is reused (ms; default 5000). */
  readonly saltReadinessCacheMs?: number;
  /** The operator dashboard's settings (its assets, the rollout workspace it reads). */
  readonly dashboard?: DashboardOptions;
  /** Where and how rollouts run; without it, this instance runs none (the rollout routes answer 503). */
  readonly rollouts?: RolloutServiceOptions | undefined;
}

export interface RunningService {
  /** http://host:port actually bound. */
  readonly address: string;
  readonly app: FastifyInstance;
  readonly metrics: ServiceMetrics;
  readonly loops: Loops;
  /** Drains and stops; resolves when everything in flight is settled. Idempotent. */
  stop(): Promise<void>;
}

/**
 * salt-api readiness, asked at most every `cacheMs`; concurrent probes share
 * one login. A login waits behind a publication in flight (the client's
 * gate), so a probe never waits longer than `answerWithinMs` for it: it then
 * answers with the last result known ('checking' before the first).
 */
export function saltReadiness(check: () => Promise<string>, cacheMs: number, answerWithinMs = 2_000): () => Promise<string> {
  let last: { readonly at: number; readonly answer: string } | undefined;
  let pending: Promise<string> | undefined;
  return async () => {
    if (pending === undefined && (last === undefined || Date.now() - last.at > cacheMs)) {
      const started = check().then(
        (answer) => answer,
        () => 'failed',
      );
      pending = started;
      void started.then((answer) => {
        last = { at: Date.now(), answer };
        pending = undefined;
      });
    }
    if (pending === undefined) return (last as { answer: string }).answer;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), answerWithinMs)));
    try {
      return (await Promise.race([pending, late])) ?? last?.answer ?? 'checking';
    } finally {
      clearTimeout(timer);
    }
  };
}

export async function startService(options: ServiceOptions): Promise<RunningService> {
  // Every commit of this process goes through the announcing store: the dashboard's live events hear it there.
  const feed = createChangeFeed((error) => options.logger.error({ code: error instanceof Error ? error.name : 'error' }, 'a change listener failed'));
  const deps: MasterDeps & { logger: Logger } = {
    store: announcingStore(options.store, feed),
    salt: options.salt,
    logger: options.logger,
    callTimeoutMs: options.callTimeoutMs,
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.crashAt === undefined ? {} : { crashAt: options.crashAt }),
  };
  const metrics = createServiceMetrics({ store: options.store });
  const controller = new AbortController();
  let draining = false;
  const loops = startLoops(deps, {
    signal: controller.signal,
    metrics,
    relayConcurrency: options.relayConcurrency,
    ...(options.relayLeaseMs === undefined ? {} : { relayLeaseMs: options.relayLeaseMs }),
    pollConcurrency: options.pollConcurrency,
    pollWalkEveryMs: options.pollWalkEveryMs,
    events: options.eventStream ? options.salt : undefined,
    keyRetentionMs: options.keyRetentionMs,
  });
  const rollouts = options.rollouts === undefined ? disabledRolloutService() : createRolloutService(deps, options.rollouts, metrics.registry);
  const ctx: ServiceContext = {
    deps,
    tokens: options.tokens,
    metrics,
    onAdmitted: () => loops.relay.wake(),
    saltReadiness: saltReadiness(
      () => options.salt.checkLogin(Math.min(options.callTimeoutMs, 5_000)).then((r) => (r.ok ? 'ok' : r.reason)),
      options.saltReadinessCacheMs ?? 5_000,
    ),
    unboundLegacy: options.unboundLegacy,
    draining: () => draining,
    dashboard: {
      feed,
      assetsDir: options.dashboard?.assetsDir === null ? undefined : (options.dashboard?.assetsDir ?? defaultAssetsDir()),
      // The dashboard reads the rollouts where this service runs them (the CLI's workspace by default).
      rolloutWorkspace: options.dashboard?.rolloutWorkspace ?? options.rollouts?.workspace,
    },
    rollouts,
  };

  let app: FastifyInstance | undefined;
  let address: string;
  let connections: ConnectionDrain;
  try {
    app = await buildApp(ctx);
    connections = trackConnections(app.server);
    address = await app.listen({ host: options.host, port: options.port });
  } catch (error) {
    await app?.close();
    controller.abort();
    await Promise.all([loops.done.catch(() => undefined), rollouts.stop()]);
    throw error;
  }
  const listening = app;
  // In the background: what a shutdown or a crash left interrupted goes on from its last checkpoint.
  void rollouts.resumeInterrupted();

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      draining = true;
      const closed = listening.close();
      // Sockets without a request in flight would otherwise hold the close until Node's headersTimeout.
      connections.closeWhenIdle();
      await closed;
      controller.abort();
      // A failed loop was logged when it failed; a rollout's end is logged by the rollout service.
      await Promise.all([loops.done.catch(() => undefined), rollouts.stop()]);
    })();
    return stopping;
  };
  return { address, app: listening, metrics, loops, stop };
}
