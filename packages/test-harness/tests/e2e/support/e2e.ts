/*
 * Shared pieces of the end-to-end suite: the real master runner (file store,
 * salt-api client, logger) wired to a real local Salt topology, a counting
 * SaltClient wrapper, condition waits with deadlines, evidence readers for
 * the minion's receipt store and the master's records, and per-scenario
 * timings for the closing note.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createFileRecordStore,
  createMasterLogger,
  createSaltApiClient,
  poll,
  type CallOutcome,
  type MasterDeps,
  type PollResult,
  type PublishOutcome,
  type RecordStore,
  type SaltClient,
} from '@oduflow/master-runner';
import { isPollable, isProtocolRecord, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { expect } from 'vitest';
import type { Topology } from '../../../src/topology.js';
import { waitFor } from '../../../src/topology-process.js';

const RECEIPT_KEYS = ['jid', 'minion_id', 'passed', 'profile', 'protocol', 'request_id', 'state_digest', 'status', 'total'];
const JID_INDEX_KEYS = ['jid', 'minion_id', 'profile', 'protocol', 'request_id', 'state_digest'];
const TERMINAL = new Set(['succeeded', 'failed', 'unknown']);

/** Strings that only raw Salt state output contains (state tags, result fields, commands of the test roles). */
export const RAW_OUTPUT_NEEDLES = [
  '_|-',
  '"comment"',
  '"changes"',
  '"stdout"',
  '"stderr"',
  '__run_num__',
  '__sls__',
  'client_stack_marker',
  'client_stack_config',
  'client_credentials_rotate',
  'client_storage_resize_slow',
  'client_production_release',
  'echo ',
  'sleep ',
];

/** The topology's condition wait (a deadline, never a fixed sleep). */
export const waitUntil = waitFor;

/** One publish call as the runner made it, and what the real client answered. */
interface PublishCall {
  readonly minionId: string;
  readonly jid: string;
  readonly fun: string;
  readonly args: readonly string[];
  readonly outcome: PublishOutcome;
}

/** The real SaltClient, with every publish counted and an optional one-shot hook run before the next one. */
interface CountingSalt extends SaltClient {
  readonly publishes: PublishCall[];
  readonly calls: Array<{ minionId: string; fun: string }>;
  /** Runs `hook` right before the next publish is delegated (once). */
  beforeNextPublish(hook: () => Promise<void>): void;
}

/**
 * Wraps the real client to count what the runner sent. The real client itself
 * runs its salt-api exchanges one at a time (salt-api 3006.27 races on its
 * `.root_key` file when requests arrive together; see createSaltApiClient).
 */
function countingSalt(inner: SaltClient): CountingSalt {
  const publishes: PublishCall[] = [];
  const calls: Array<{ minionId: string; fun: string }> = [];
  let hook: (() => Promise<void>) | undefined;
  return {
    publishes,
    calls,
    beforeNextPublish(next) {
      hook = next;
    },
    async publish(minionId, jid, fun, args) {
      const run = hook;
      hook = undefined;
      if (run !== undefined) await run();
      const outcome = await inner.publish(minionId, jid, fun, args);
      publishes.push({ minionId, jid, fun, args: [...args], outcome });
      return outcome;
    },
    async call(minionId, fun, args, timeoutMs): Promise<CallOutcome> {
      calls.push({ minionId, fun });
      return inner.call(minionId, fun, args, timeoutMs);
    },
  };
}

export interface E2eMaster {
  readonly deps: MasterDeps;
  readonly store: RecordStore;
  readonly salt: CountingSalt;
  /** The master's private record store directory. */
  readonly storeDir: string;
  /** The runner's pino log (level debug). */
  readonly logFile: string;
  /** Every file the master side wrote: records, JID indexes, its log. */
  files(): string[];
  close(): Promise<void>;
}

/**
 * A master runner of its own (private store dir and log) talking to the
 * topology's salt-api, or to `url` (a proxy in front of it).
 */
export async function createE2eMaster(
  topo: Topology,
  options: { url?: string; callTimeoutMs?: number } = {},
): Promise<E2eMaster> {
  const root = mkdtempSync(join(tmpdir(), 'oduflow-e2e-master-'));
  const storeDir = join(root, 'store');
  const logFile = join(root, 'master.log');
  const store = await createFileRecordStore({ root: storeDir });
  const logFd = openSync(logFile, 'a', 0o600);
  const real = createSaltApiClient({
    url: options.url ?? topo.saltApiUrl,
    username: topo.username,
    passwordFile: topo.passwordFile,
    eauth: topo.eauth,
    timeoutMs: 30_000,
  });
  const salt = countingSalt(real);
  const logger = createMasterLogger({ level: 'debug', fd: logFd });
  const deps: MasterDeps = { store, salt, logger, callTimeoutMs: options.callTimeoutMs ?? 20_000 };
  let closed = false;
  return {
    deps,
    store,
    salt,
    storeDir,
    logFile,
    files: () => [...listFiles(storeDir), logFile],
    async close() {
      if (closed) return;
      closed = true;
      await store.close();
      closeSync(logFd);
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** Regular files below `dir` (recursively); none when it does not exist. */
export function listFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(path));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** Files among `files` that contain any of `needles`, with the needles found. */
export function filesContaining(files: readonly string[], needles: readonly string[]): Array<{ file: string; needles: string[] }> {
  const hits: Array<{ file: string; needles: string[] }> = [];
  for (const file of files) {
    if (!existsSync(file) || !statSync(file).isFile()) continue;
    const text = readFileSync(file, 'utf8');
    const found = needles.filter((needle) => text.includes(needle));
    if (found.length > 0) hits.push({ file, needles: found });
  }
  return hits;
}

/** The minion's request records (`requests/<id>.json`) and JID indexes, parsed. */
export function minionEvidence(topo: Topology, minionId: string): {
  requests: Record<string, Record<string, unknown>>;
  jids: Record<string, Record<string, unknown>>;
} {
  const read = (sub: string) => {
    const dir = join(topo.receiptDir(minionId), sub);
    const out: Record<string, Record<string, unknown>> = {};
    if (!existsSync(dir)) return out;
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.json')) continue;
      out[name.slice(0, -'.json'.length)] = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Record<string, unknown>;
    }
    return out;
  };
  return { requests: read('requests'), jids: read('jids') };
}

/** The minion's committed receipt for a request, once it is terminal. */
export function terminalReceipt(topo: Topology, minionId: string, requestId: string): Record<string, unknown> | undefined {
  const path = join(topo.receiptDir(minionId), 'requests', `${requestId}.json`);
  if (!existsSync(path)) return undefined;
  try {
    const receipt = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    return TERMINAL.has(String(receipt['status'])) ? receipt : undefined;
  } catch {
    return undefined; // never half-written (atomic rename), but stay defensive
  }
}

/** Polls until the record leaves publishing/published/running; returns the last poll. */
export async function pollUntilSettled(deps: MasterDeps, requestId: string, timeoutMs = 60_000): Promise<PollResult> {
  let last: PollResult | undefined;
  return waitUntil(
    () => `request ${requestId} to settle (last: ${last?.record.state ?? 'none'}/${last?.observed ? JSON.stringify(last.observed) : '-'})`,
    timeoutMs,
    async () => {
      last = await poll(deps, requestId);
      return isPollable(last.record) ? undefined : last;
    },
    250,
  );
}

/** The record as a protocol-1 record (everything the runner creates is one). */
export function asProtocol(record: RequestRecord): ProtocolRequestRecord {
  if (!isProtocolRecord(record)) throw new Error(`e2e: record ${record.request_id} is not a protocol-1 record`);
  return record;
}

/** Per-scenario timing: one console line each, for the closing note. */
export function scenarioTimer(label: string): (outcome: string) => void {
  const startedAt = Date.now();
  return (outcome) => {
    const seconds = ((Date.now() - startedAt) / 1000).toFixed(1);
    console.log(`[e2e] ${label}: ${outcome} (${seconds} s)`);
  };
}

/**
 * Asserts every request file on every minion holds exactly the nine receipt
 * keys and every JID index exactly its six; returns how many request files.
 */
export function expectMinimalMinionFiles(topo: Topology): number {
  let receipts = 0;
  for (const id of topo.minionIds) {
    const { requests, jids } = minionEvidence(topo, id);
    for (const receipt of Object.values(requests)) {
      expect(Object.keys(receipt).sort()).toEqual(RECEIPT_KEYS);
      receipts += 1;
    }
    for (const index of Object.values(jids)) expect(Object.keys(index).sort()).toEqual(JID_INDEX_KEYS);
  }
  return receipts;
}
