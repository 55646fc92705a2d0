import {
  createFileRecordStore,
  createSaltApiClient,
  MasterRunnerError,
  type Logger,
  type MasterDeps,
  type RecordStore,
  type SaltApiClient,
} from '@oduflow/master-runner';
import { noCrash, type CrashPoint, type StoreCrashPoint } from '@oduflow/master-runner/internal';
import { saltConfig, storeConfig, type CommonFlags, type SaltConfig } from './config.js';

/*
 * Builds the runner's dependencies for one command. The store and the Salt
 * client are opened only by commands that need them, after the command's own
 * input has been validated, so a refused command writes nothing and reads no
 * credentials.
 */

export type Env = Readonly<Record<string, string | undefined>>;

/**
 * Test seams at the durable boundaries (see master-runner's crash-points.ts).
 * The shipped executable (cli.ts) passes none, so nothing it reads — no flag,
 * no environment variable — can make it kill itself; only the test-only entry
 * of the crash tests injects them.
 */
export interface Seams {
  readonly crashAt?: (point: CrashPoint) => void;
  readonly storeCrashAt?: (point: StoreCrashPoint) => void;
  /** After each durable checkpoint of a rollout (`kind`, and the stage index of a stage checkpoint). */
  readonly rolloutCheckpoint?: (kind: string, stageIndex: number | null) => void;
}

export interface Wiring {
  readonly flags: CommonFlags;
  readonly env: Env;
  readonly logger: Logger;
  readonly seams: Seams;
}

export async function openStore(w: Wiring, options: { readonly create?: boolean } = {}): Promise<RecordStore> {
  const config = storeConfig(w.flags, w.env);
  if (config.kind === 'postgres') {
    // Loaded only for a PostgreSQL store, so a file-store master never loads pg.
    const { createPostgresRecordStore } = await import('@oduflow/master-runner/postgres');
    const { kind: _kind, ...options } = config;
    return createPostgresRecordStore(options);
  }
  return createFileRecordStore({
    root: config.store,
    create: options.create ?? true,
    // Explicit, whatever the store's own default: the shipped CLI never arms it.
    crashAt: w.seams.storeCrashAt ?? noCrash,
  });
}

async function withStore<T>(w: Wiring, work: (store: RecordStore) => Promise<T>): Promise<T> {
  const store = await openStore(w);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

/**
 * For commands that only read (or change an existing record): creates no
 * directory. A missing store (no directory, or one without requests/) gives
 * `missing()` — an empty answer, or a not_found refusal.
 */
export async function withExistingStore<T>(w: Wiring, work: (store: RecordStore) => Promise<T>, missing: () => T): Promise<T> {
  let store: RecordStore;
  try {
    store = await openStore(w, { create: false });
  } catch (error) {
    if (MasterRunnerError.isInstance(error) && error.code === 'not_found' && error.detail === 'no_store') return missing();
    throw error;
  }
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

export function saltClient(config: SaltConfig): SaltApiClient {
  return createSaltApiClient({ url: config.url, username: config.username, passwordFile: config.passwordFile, eauth: config.eauth });
}

/** Store and Salt: for the commands that publish or poll. Credentials are checked before the store is opened. */
export async function withMaster<T>(w: Wiring, work: (deps: MasterDeps) => Promise<T>): Promise<T> {
  const config = saltConfig(w.flags, w.env);
  const salt = saltClient(config);
  return withStore(w, (store) =>
    work({ store, salt, logger: w.logger, callTimeoutMs: config.callTimeoutMs, crashAt: w.seams.crashAt ?? noCrash }),
  );
}

/** Salt only, no store: for the read-only fleet check. */
export async function withSalt<T>(w: Wiring, work: (salt: SaltApiClient, callTimeoutMs: number) => Promise<T>): Promise<T> {
  const config = saltConfig(w.flags, w.env);
  return work(saltClient(config), config.callTimeoutMs);
}
