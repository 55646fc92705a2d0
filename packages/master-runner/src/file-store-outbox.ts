import { isJid, isMinionId, isRequestId } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { MasterRunnerError } from './errors.js';
import { isPlainObject } from './plain-object.js';
import type { OutboxEntry } from './record-store.js';
import { isNotFound } from './store-format.js';

/*
 * outbox/<request_id>.json of the file store: an admitted request whose
 * publication is still to come, with the state data to publish (0600 like
 * every file of the store; removed once the request is handed to Salt).
 * `minion_id` and `jid` tie the entry to the create attempt that wrote it:
 * an entry is only handed out while a record with that request id and that
 * JID exists, so one left by a create cut before its record (S7), or by a
 * create that lost its request id to another, is never read as another
 * record's.
 */

export interface OutboxFileEntry {
  readonly request_id: string;
  readonly minion_id: string;
  readonly jid: string;
  readonly state_data_json: string;
  /** Its record's created_at. */
  readonly enqueued_at: string;
  /** How many times a relay claimed it. */
  readonly attempts: number;
  /** ISO instant it is due again after a deferral; null: due now. */
  readonly due_at: string | null;
  /** ISO instant a relay's claim on it ends; null: not claimed. */
  readonly claimed_until: string | null;
}

function outboxFileName(requestId: string): string {
  return `${requestId}.json`;
}

function requestIdOfOutboxFile(name: string): string | undefined {
  const id = name.endsWith('.json') ? name.slice(0, -'.json'.length) : '';
  return isRequestId(id) ? id : undefined;
}

function isInstantOrNull(value: unknown): value is string | null {
  return value === null || (typeof value === 'string' && Number.isFinite(Date.parse(value)));
}

function corrupt(): MasterRunnerError {
  // Never echoes the entry: it holds state data.
  return new MasterRunnerError('store_corrupt', 'an outbox entry of the store is not what this runner writes');
}

function decodeOutboxEntry(raw: unknown, requestId: string): OutboxFileEntry {
  if (!isPlainObject(raw)) throw corrupt();
  const ok =
    raw['request_id'] === requestId &&
    isMinionId(raw['minion_id']) &&
    isJid(raw['jid']) &&
    typeof raw['state_data_json'] === 'string' &&
    typeof raw['enqueued_at'] === 'string' &&
    Number.isFinite(Date.parse(raw['enqueued_at'])) &&
    Number.isSafeInteger(raw['attempts']) &&
    (raw['attempts'] as number) >= 0 &&
    isInstantOrNull(raw['due_at']) &&
    isInstantOrNull(raw['claimed_until']);
  if (!ok) throw corrupt();
  return raw as unknown as OutboxFileEntry;
}

export function readOutboxEntry(dir: PrivateDir, requestId: string): OutboxFileEntry | undefined {
  const raw = dir.readJsonIfExists(outboxFileName(requestId));
  return raw === undefined ? undefined : decodeOutboxEntry(raw, requestId);
}

/** Every entry of the outbox (names that are no entry, such as a dead writer's temporary file, are skipped). */
export function readOutbox(dir: PrivateDir): OutboxFileEntry[] {
  const entries: OutboxFileEntry[] = [];
  for (const name of dir.list()) {
    const requestId = requestIdOfOutboxFile(name);
    if (requestId === undefined) continue;
    const entry = readOutboxEntry(dir, requestId);
    if (entry !== undefined) entries.push(entry);
  }
  return entries;
}

export function writeOutboxEntry(dir: PrivateDir, entry: OutboxFileEntry): void {
  dir.writeJsonAtomic(outboxFileName(entry.request_id), entry, { replace: true });
}

export function removeOutboxEntry(dir: PrivateDir, requestId: string): void {
  try {
    dir.remove(outboxFileName(requestId));
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}

/** Whether the entry may be claimed at `now`: due, and no other relay's claim is live. */
export function isClaimable(entry: OutboxFileEntry, now: number): boolean {
  const due = entry.due_at === null || Date.parse(entry.due_at) <= now;
  const free = entry.claimed_until === null || Date.parse(entry.claimed_until) <= now;
  return due && free;
}

/** Oldest first, then by request id: the order claimOutbox hands entries out. */
export function byEnqueued(a: OutboxFileEntry, b: OutboxFileEntry): number {
  const at = Date.parse(a.enqueued_at) - Date.parse(b.enqueued_at);
  if (at !== 0) return at;
  return a.request_id < b.request_id ? -1 : a.request_id > b.request_id ? 1 : 0;
}

export function toOutboxEntry(entry: OutboxFileEntry): OutboxEntry {
  return { requestId: entry.request_id, stateDataJson: entry.state_data_json, enqueuedAt: entry.enqueued_at, attempts: entry.attempts };
}
