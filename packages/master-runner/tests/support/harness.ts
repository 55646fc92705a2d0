import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFileRecordStore } from '../../src/file-record-store.js';
import { MasterRunnerError } from '../../src/errors.js';
import type { MasterDeps } from '../../src/deps.js';
import type { RecordStore } from '../../src/record-store.js';
import { createSaltApiClient, type SaltApiClient } from '../../src/salt-api-client.js';
import type { SaltClient } from '../../src/salt-client.js';
import { startSaltApiStandIn, type SaltApiStandIn } from './salt-api-standin.js';

export const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
export const OTHER_MINION = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
export const REQUEST_A = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';
export const REQUEST_B = '1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5';

/** A private scratch directory (0700), removed by the returned function. */
export function scratchDir(prefix = 'oduflow-mr-'): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o700);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export function writePasswordFile(dir: string, password: string, mode = 0o600): string {
  const path = join(dir, `salt-api-password-${mode.toString(8)}`);
  writeFileSync(path, `${password}\n`, { mode });
  chmodSync(path, mode);
  return path;
}

/** A clock that starts at `startIso` and advances one millisecond per reading. */
function steppingClock(startIso = '2026-11-29T10:00:00.000Z'): () => Date {
  let ms = Date.parse(startIso);
  return () => new Date(ms++);
}

export interface World {
  readonly scratch: string;
  readonly storeRoot: string;
  readonly store: RecordStore;
  readonly standIn: SaltApiStandIn;
  readonly salt: SaltApiClient;
  readonly passwordFile: string;
  readonly deps: MasterDeps;
  /** Deps of a second runner worker: the same store, its own salt-api client (a client serializes its own exchanges). */
  anotherWorker(): MasterDeps;
  close(): Promise<void>;
}

export async function makeWorld(options: { callTimeoutMs?: number; publishTimeoutMs?: number } = {}): Promise<World> {
  const { dir, remove } = scratchDir();
  const storeRoot = join(dir, 'store');
  const store = await createFileRecordStore({ root: storeRoot, lockWaitMs: 10_000 });
  const standIn = await startSaltApiStandIn();
  const passwordFile = writePasswordFile(dir, standIn.password);
  const newClient = () =>
    createSaltApiClient({
      url: standIn.url,
      username: standIn.username,
      passwordFile,
      eauth: 'sharedsecret',
      timeoutMs: options.publishTimeoutMs ?? 2_000,
    });
  const salt = newClient();
  const depsWith = (client: SaltClient): MasterDeps => ({
    store,
    salt: client,
    now: steppingClock(),
    callTimeoutMs: options.callTimeoutMs ?? 2_000,
    crashAt: () => undefined,
  });
  const deps = depsWith(salt);
  return {
    scratch: dir,
    storeRoot,
    store,
    standIn,
    salt,
    passwordFile,
    deps,
    anotherWorker: () => depsWith(newClient()),
    close: async () => {
      await store.close();
      await standIn.close();
      remove();
    },
  };
}

/** A store that forwards every call to `store` except those in `overrides` (to hold or count one of them). */
export function wrapStore(store: RecordStore, overrides: Partial<RecordStore>): RecordStore {
  return {
    location: store.location,
    get: (id) => store.get(id),
    getByJid: (jid) => store.getByJid(jid),
    list: (filter, page) => store.list(filter, page),
    countUnresolved: () => store.countUnresolved(),
    scan: (filter, options) => store.scan(filter, options),
    blockersOf: (minionId) => store.blockersOf(minionId),
    withTarget: (minionId, work) => store.withTarget(minionId, work),
    updateRequest: (id, decide, change) => store.updateRequest(id, decide, change),
    history: (id) => store.history(id),
    claimKey: (key, options) => store.claimKey(key, options),
    releaseKey: (key, requestId) => store.releaseKey(key, requestId),
    expireKeys: (before) => store.expireKeys(before),
    claimOutbox: (options) => store.claimOutbox(options),
    removeOutbox: (requestId) => store.removeOutbox(requestId),
    deferOutbox: (requestId, at) => store.deferOutbox(requestId, at),
    close: () => store.close(),
    ...overrides,
  };
}

/** The MasterRunnerError `promise` rejects with; fails if it resolves or rejects with anything else. */
export async function refusal(promise: Promise<unknown>): Promise<MasterRunnerError> {
  try {
    await promise;
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}
