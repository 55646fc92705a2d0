import { createFileRecordStore, createMasterLogger, createSaltApiClient, type RecordStore, type SaltApiClient } from '@oduflow/master-runner';
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { writePasswordFile } from '../../../../../packages/master-runner/tests/support/harness.js';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { startService, type RunningService, type ServiceOptions } from '../../../src/serve/service.js';
import { tokenDigest, tokenRegistry, type Scope, type TokenRegistry } from '../../../src/serve/tokens.js';

/*
 * A running service in the test process, on port 0, over a private file
 * store and the salt-api stand-in, with its log captured in a file (through
 * the master logger, so with its redaction). Routes are exercised with
 * app.inject; the background loops run for real.
 */

export const ACME_A = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
export const ACME_B = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
export const GLOBEX_A = 'client-9c8b7a60-5d4e-4f3a-8b2c-1d0e9f8a7b6c';
/** Owned by no tenant. */
export const NOBODYS = 'client-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';

/** Raw bearer tokens of the test tokens file. */
export const TOKENS = {
  acmeAll: 'odf_acme-all-0000000000000000000000000000000000',
  acmeRead: 'odf_acme-read-000000000000000000000000000000000',
  acmeDispatch: 'odf_acme-dispatch-00000000000000000000000000000',
  acmeReconcile: 'odf_acme-reconcile-0000000000000000000000000000',
  globexAll: 'odf_globex-all-00000000000000000000000000000000',
} as const;

const ALL: Scope[] = ['read', 'dispatch', 'dispatch:custom', 'reconcile'];

export function testTokensFile(): unknown {
  const entry = (id: string, token: string, tenant: string, actor: string, scopes: Scope[]) => ({ id, sha256: tokenDigest(token), tenant, actor, scopes });
  return {
    tenants: { acme: { minions: [ACME_A, ACME_B] }, globex: { minions: [GLOBEX_A] } },
    tokens: [
      entry('acme-all', TOKENS.acmeAll, 'acme', 'acme-ops', ALL),
      entry('acme-read', TOKENS.acmeRead, 'acme', 'acme-viewer', ['read']),
      entry('acme-dispatch', TOKENS.acmeDispatch, 'acme', 'acme-ci', ['read', 'dispatch']),
      entry('acme-reconcile', TOKENS.acmeReconcile, 'acme', 'acme-oncall', ['read', 'reconcile']),
      entry('globex-all', TOKENS.globexAll, 'globex', 'globex-ops', ALL),
    ],
  };
}

export interface ServiceWorld {
  readonly dir: string;
  readonly storeRoot: string;
  /** The rollout workspace (rollouts asked for over HTTP live under its http/). */
  readonly rolloutWorkspace: string;
  readonly store: RecordStore;
  readonly standIn: SaltApiStandIn;
  readonly salt: SaltApiClient;
  readonly service: RunningService;
  readonly tokens: TokenRegistry;
  /** One HTTP exchange; `token` and `key` set Authorization and Idempotency-Key. */
  call(options: InjectOptions & { readonly token?: string; readonly key?: string }): Promise<LightMyRequestResponse>;
  /** Everything the service logged so far. */
  logs(): string;
  close(): Promise<void>;
}

/** Opens the world's store: by default a file store under `storeRoot`. */
export type StoreOpener = (storeRoot: string) => Promise<RecordStore>;

const fileStore: StoreOpener = (storeRoot) => createFileRecordStore({ root: storeRoot, lockWaitMs: 10_000 });

export async function startServiceWorld(overrides: Partial<ServiceOptions> = {}, openStore: StoreOpener = fileStore): Promise<ServiceWorld> {
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-'));
  chmodSync(dir, 0o700);
  const storeRoot = join(dir, 'store');
  const store = await openStore(storeRoot);
  const standIn = await startSaltApiStandIn();
  const salt = createSaltApiClient({
    url: standIn.url,
    username: standIn.username,
    passwordFile: writePasswordFile(dir, standIn.password),
    eauth: 'sharedsecret',
    // Generous: the machine may be loaded, and no test here waits for a deadline to pass.
    timeoutMs: 10_000,
  });
  const logPath = join(dir, 'service.log');
  const logFd = openSync(logPath, 'w', 0o600);
  const logger = createMasterLogger({ fd: logFd, level: 'debug' });
  const tokens = tokenRegistry(testTokensFile(), '/test/tokens.json');
  const rolloutWorkspace = join(dir, 'rollouts');
  const service = await startService({
    store,
    salt,
    logger,
    callTimeoutMs: 10_000,
    tokens: () => tokens,
    host: '127.0.0.1',
    port: 0,
    relayConcurrency: 2,
    pollConcurrency: 8,
    pollWalkEveryMs: 200,
    eventStream: true,
    keyRetentionMs: 24 * 3_600_000,
    unboundLegacy: [],
    // Quick rounds: the rollout tests wait on conditions, never on these.
    rollouts: { workspace: rolloutWorkspace, pollIntervalMs: 20, stageTimeoutMs: 30_000 },
    ...overrides,
  });
  return {
    dir,
    storeRoot,
    rolloutWorkspace,
    store,
    standIn,
    salt,
    service,
    tokens,
    call: ({ token, key, headers, ...options }) =>
      service.app.inject({
        ...options,
        headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...(key === undefined ? {} : { 'idempotency-key': key }), ...headers },
      }),
    logs: () => {
      logger.flush();
      return readFileSync(logPath, 'utf8');
    },
    close: async () => {
      await service.stop();
      salt.close();
      await store.close();
      await standIn.close();
      closeSync(logFd);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits for a condition, failing after the deadline (no fixed sleeps). */
export async function waitFor(condition: () => boolean | Promise<boolean>, deadlineMs = 10_000, what = 'condition'): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`${what} not met before the deadline`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
