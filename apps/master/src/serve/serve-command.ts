import { MasterRunnerError, preflight, type RecordStore } from '@oduflow/master-runner';
import type { LegacyRequestRecord } from '@oduflow/protocol';
import { saltConfig, storeConfig } from '../config.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import { openStore, saltClient, type Wiring } from '../wiring.js';
import { rolloutServeConfig, type RolloutServeFlags } from './rollout-config.js';
import { holdServeLock, type ServeLock } from './serve-lock.js';
import { serveConfig, type ServeConfig, type ServeFlags } from './serve-config.js';
import { startService } from './service.js';
import { loadTokensFile, type TokenRegistry } from './tokens.js';

/*
 * `oduflow-master serve`: the HTTP service and its background loops in this
 * process, until SIGTERM or SIGINT (drain, exit 0) or a loop fails (drain,
 * exit 1: a supervisor restarts it). SIGHUP reloads the tokens file (a file
 * that does not load is refused and the old one stays). Everything is
 * checked before the store is opened; the store is refused while it holds
 * active legacy records, unless --accept-legacy (they stay blocking).
 *
 * Logs on stderr; the line "serving" carries the bound `address` (port 0
 * picks a free one: tests and multi-instance runs read it from there).
 */

export interface ServeIo {
  readonly stderr: (text: string) => void;
}

type Stop = { readonly kind: 'signal'; readonly signal: NodeJS.Signals } | { readonly kind: 'failed'; readonly loop: string };

function legacyLine(r: LegacyRequestRecord): string {
  return `  ${r.request_id}: ${r.minion_id === null ? 'names no target, blocks every target' : `blocks ${r.minion_id}`}${r.recorded_state === null ? '' : ` (recorded ${r.recorded_state})`}\n`;
}

function errorLine(error: MasterRunnerError): string {
  return `error [${error.code}${error.detail === undefined ? '' : `/${error.detail}`}]: ${error.message}\n`;
}

export async function serveCommand(w: Wiring, flags: ServeFlags & RolloutServeFlags, io: ServeIo): Promise<ExitCode> {
  const config: ServeConfig = serveConfig(flags, w.env);
  const rollouts = rolloutServeConfig(flags, w.env);
  const salt = saltConfig(flags, w.env);
  const store = storeConfig(flags, w.env);
  let tokens: TokenRegistry = loadTokensFile(config.tokensFile);
  const client = saltClient(salt);
  const log = w.logger;

  let records: RecordStore | undefined;
  let lock: ServeLock | undefined;
  // Signals are taken from the start: one during start-up stops the service as soon as it is up.
  let stopped: (stop: Stop) => void = () => undefined;
  const stopRequested = new Promise<Stop>((resolve) => (stopped = resolve));
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    // A second signal while draining: say so, and keep draining (systemd's TimeoutStopSec bounds it).
    if (stopping) log.warn({ signal }, 'already stopping; waiting for the work in flight');
    stopping = true;
    stopped({ kind: 'signal', signal });
  };
  const onHup = (): void => {
    try {
      tokens = loadTokensFile(config.tokensFile);
      log.info({ tokens: tokens.tokenCount }, 'tokens file reloaded');
    } catch (error) {
      log.error({ code: MasterRunnerError.isInstance(error) ? error.code : 'internal' }, 'tokens file not reloaded; the previous one stays');
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGHUP', onHup);
  try {
    records = await openStore(w);
    if (store.kind === 'file') {
      try {
        lock = holdServeLock(store.store);
      } catch (error) {
        if (MasterRunnerError.isInstance(error) && error.code === 'store_busy') {
          io.stderr(errorLine(error));
          log.error({ code: error.code, detail: error.detail }, 'serve refused: the store is in use');
          return EXIT.busy;
        }
        throw error;
      }
    }

    const report = await preflight({ store: records });
    if (!report.clean) {
      if (!config.acceptLegacy) {
        io.stderr(
          `error [legacy]: the store holds ${report.legacy.length} active legacy record(s) from before protocol 1:\n${report.legacy.map(legacyLine).join('')}` +
            'reconcile them (oduflow-master reconcile <id> --reason …), or start with --accept-legacy to serve while they keep blocking\n',
        );
        log.error({ legacy: report.legacy.length }, 'serve refused: active legacy records');
        return EXIT.unresolved;
      }
      for (const r of report.legacy) {
        log.warn({ request_id: r.request_id, minion_id: r.minion_id, state: r.state }, 'legacy record accepted: it keeps blocking its target');
      }
    }

    let service;
    try {
      service = await startService({
        store: records,
        salt: client,
        logger: log,
        callTimeoutMs: salt.callTimeoutMs,
        tokens: () => tokens,
        host: config.host,
        port: config.port,
        relayConcurrency: config.relayConcurrency,
        pollConcurrency: config.pollConcurrency,
        pollWalkEveryMs: config.pollWalkEveryMs,
        eventStream: config.eventStream,
        keyRetentionMs: config.keyRetentionMs,
        unboundLegacy: report.legacy.filter((r) => r.minion_id === null).map((r) => r.request_id),
        ...(w.seams.crashAt === undefined ? {} : { crashAt: w.seams.crashAt }),
        rollouts: { ...rollouts, ...(w.seams.rolloutCheckpoint === undefined ? {} : { onCheckpoint: w.seams.rolloutCheckpoint }) },
      });
    } catch (error) {
      const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
      if (code === 'EADDRINUSE' || code === 'EADDRNOTAVAIL' || code === 'EACCES') {
        throw new MasterRunnerError('config_invalid', `cannot listen on ${config.host}:${config.port} (${code})`);
      }
      throw error;
    }
    log.info(
      { address: service.address, store: records.location, tokens: tokens.tokenCount, event_stream: config.eventStream, rollout_workspace: rollouts.workspace },
      'serving',
    );

    void service.loops.failed.then((f) => {
      stopping = true;
      stopped({ kind: 'failed', loop: f.loop });
    });
    const stop = await stopRequested;
    log.info(stop.kind === 'signal' ? { signal: stop.signal } : { loop: stop.loop }, 'stopping: draining requests and background loops');
    await service.stop();
    log.info('stopped');
    return stop.kind === 'signal' ? EXIT.ok : EXIT.internal;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    process.off('SIGHUP', onHup);
    client.close();
    lock?.release();
    await records?.close();
  }
}
