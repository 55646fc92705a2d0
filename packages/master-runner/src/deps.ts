import { randomUUID } from 'node:crypto';
import { noCrash, type CrashPoint } from './crash-points.js';
import { silentLogger, type Logger } from './logger.js';
import type { RecordStore } from './record-store.js';
import type { SaltClient } from './salt-client.js';

/**
 * What dispatch, poll, reconcile and preflight work with. Everything with a
 * side effect or a clock comes in here, so rollouts, an HTTP service and tests
 * can wire their own.
 */
export interface MasterDeps {
  readonly store: RecordStore;
  readonly salt: SaltClient;
  /** Wall clock: record timestamps and the JID. */
  readonly now?: () => Date;
  readonly logger?: Logger;
  /** Deadline of a capability or status call. */
  readonly callTimeoutMs?: number;
  /** Request ids for dispatches that bring none. */
  readonly newRequestId?: () => string;
  /** The crash-test seam (see crash-points.ts): only tests inject one; the default does nothing. */
  readonly crashAt?: (point: CrashPoint) => void;
}

export interface ResolvedDeps {
  readonly store: RecordStore;
  readonly salt: SaltClient;
  readonly now: () => Date;
  readonly logger: Logger;
  readonly callTimeoutMs: number;
  readonly newRequestId: () => string;
  readonly crashAt: (point: CrashPoint) => void;
}

export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

export function resolveDeps(deps: MasterDeps): ResolvedDeps {
  return {
    store: deps.store,
    salt: deps.salt,
    now: deps.now ?? (() => new Date()),
    logger: deps.logger ?? silentLogger(),
    callTimeoutMs: deps.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
    newRequestId: deps.newRequestId ?? randomUUID,
    crashAt: deps.crashAt ?? noCrash,
  };
}
