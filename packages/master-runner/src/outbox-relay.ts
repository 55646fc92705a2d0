import { capabilityFailed, isProtocolRecord, stateDigest, type CapabilityRejection, type RequestRecord, type TransportFailure } from '@oduflow/protocol';
import { checkCapability } from './capability.js';
import { commitEvent, nowIso } from './commit.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { publishPrepared, type PublishResultKind } from './publish.js';
import type { OutboxEntry } from './record-store.js';

/*
 * The outbox relay: hands admitted requests to Salt, each exactly once.
 * admit() stores a request `prepared` together with its outbox entry; the
 * relay claims due entries (a lease, so relays in other processes or on
 * other hosts skip them) and publishes each through publishPrepared, whose
 * intent unit lets only a record still `prepared` go out. So a relay that
 * dies after the intent leaves the record `publishing` (published-uncertain)
 * and the next relay only removes the entry; several relays racing on one
 * entry publish it once. An entry is removed once its request was handed to
 * Salt (acknowledged or uncertain) or no longer needs it (not `prepared`:
 * published by another worker or reconciled by an operator); a publication
 * that provably sent nothing is retried later with the same JID.
 */

export interface RelayMetrics {
  /** One entry handled: its publication's outcome, or 'skipped' (removed or deferred without one). */
  onPublication?(outcome: PublishResultKind | 'skipped'): void;
}

export interface RelayOptions {
  readonly signal: AbortSignal;
  /** Entries handled at once (default 4; Salt publications stay serialized by the client's gate). */
  readonly concurrency?: number;
  /** Pause when the outbox is empty (ms, default 500); wake() cuts it short. */
  readonly idleMs?: number;
  /** How long a claimed entry is skipped by other relays (ms, default 120 000). */
  readonly leaseMs?: number;
  /** An entry older than this gets a fresh capability call before it is published (ms, default 300 000). */
  readonly recheckCapabilityAfterMs?: number;
  /** A publication that provably sent nothing is retried after this (ms, default 5 000), doubling per attempt, at most 5 min. */
  readonly notSentBackoffMs?: number;
  /** A request was handed to Salt (published, or publish_uncertain): the service calls poller.watch(id). */
  readonly onPublished?: (record: RequestRecord) => void;
  readonly metrics?: RelayMetrics;
}

export interface OutboxRelay {
  /** Resolves once the signal aborted and the entries in hand were finished (a publication in flight is awaited and recorded). */
  readonly done: Promise<void>;
  /** Something was admitted: look at the outbox now instead of after the idle pause. */
  wake(): void;
}

/** Why the relay handled an entry without publishing it. */
export type RelaySkip =
  /** The entry's record does not exist (a create that never finished): removed. */
  | 'no_record'
  /** The record is no longer `prepared` (published by another worker, reconciled): removed. */
  | 'not_prepared'
  /** The entry's state data is not what the record's digest says: removed, the record left prepared for an operator. */
  | 'state_data_mismatch'
  /** A fresh capability call on a stale entry: the minion answered it cannot execute; the request is now `rejected`, the entry removed. */
  | CapabilityRejection['code']
  /** A fresh capability call got no answer, or no accepted key matched: deferred. */
  | 'unreachable'
  | 'no_target';

export type RelayResult =
  | { readonly requestId: string; readonly outcome: 'published' | 'already_publishing'; readonly record: RequestRecord }
  | { readonly requestId: string; readonly outcome: 'publish_uncertain' | 'not_sent'; readonly record: RequestRecord; readonly failure: TransportFailure }
  | { readonly requestId: string; readonly outcome: 'skipped'; readonly skip: RelaySkip; readonly record?: RequestRecord };

interface Settings {
  readonly concurrency: number;
  readonly idleMs: number;
  readonly leaseMs: number;
  readonly recheckAfterMs: number;
  readonly notSentBackoffMs: number;
  readonly onPublished: (record: RequestRecord) => void;
  readonly metrics: RelayMetrics;
}

const MAX_BACKOFF_MS = 5 * 60_000;

function setting(value: number | undefined, fallback: number, what: string, min: number): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < min) throw new MasterRunnerError('config_invalid', `the outbox relay's ${what} must be a whole number of at least ${min}`);
  return chosen;
}

function settingsOf(options: Omit<RelayOptions, 'signal'>): Settings {
  return {
    concurrency: setting(options.concurrency, 4, 'concurrency', 1),
    idleMs: setting(options.idleMs, 500, 'idle pause', 0),
    leaseMs: setting(options.leaseMs, 120_000, 'lease', 1),
    recheckAfterMs: setting(options.recheckCapabilityAfterMs, 300_000, 'capability recheck age', 0),
    notSentBackoffMs: setting(options.notSentBackoffMs, 5_000, 'not-sent backoff', 1),
    onPublished: options.onPublished ?? (() => undefined),
    metrics: options.metrics ?? {},
  };
}

/** The pause before the next try of an entry claimed `attempts` times: doubling, capped. */
function backoffMs(settings: Settings, attempts: number): number {
  return Math.min(MAX_BACKOFF_MS, settings.notSentBackoffMs * 2 ** Math.min(Math.max(attempts - 1, 0), 20));
}

/** The entry carries the state data whose digest the record was admitted with ('' for the fixed profiles). */
function belongsTo(entry: OutboxEntry, record: RequestRecord): boolean {
  if (!isProtocolRecord(record)) return false;
  if (record.profile !== 'custom') return entry.stateDataJson === '' && record.state_digest === '';
  try {
    return stateDigest(entry.stateDataJson) === record.state_digest;
  } catch {
    return false;
  }
}

/** One entry, start to end. Store failures throw (the entry's claim lapses and another pass takes it). */
async function relayEntry(d: ResolvedDeps, settings: Settings, entry: OutboxEntry): Promise<RelayResult> {
  const { requestId } = entry;
  const skipped = async (skip: RelaySkip, record: RequestRecord | undefined, then: 'remove' | 'defer'): Promise<RelayResult> => {
    if (then === 'remove') await d.store.removeOutbox(requestId);
    else await d.store.deferOutbox(requestId, new Date(d.now().getTime() + backoffMs(settings, entry.attempts)));
    return record === undefined ? { requestId, outcome: 'skipped', skip } : { requestId, outcome: 'skipped', skip, record };
  };

  const record = await d.store.get(requestId);
  if (record === undefined) return skipped('no_record', undefined, 'remove');
  if (record.state !== 'prepared' || !isProtocolRecord(record)) return skipped('not_prepared', record, 'remove');
  const log = d.logger.child({ request_id: requestId, minion_id: record.minion_id, jid: record.jid });
  if (!belongsTo(entry, record)) {
    log.error('an outbox entry does not carry the state data its request was admitted with; not published, the request stays prepared');
    return skipped('state_data_mismatch', record, 'remove');
  }

  if (d.now().getTime() - Date.parse(entry.enqueuedAt) > settings.recheckAfterMs) {
    // Admitted a while ago: the minion may have changed since its capability was proven.
    const capability = await checkCapability(d, record.minion_id);
    if (capability.kind === 'unreachable' || capability.kind === 'no_target') return skipped(capability.kind, record, 'defer');
    if (capability.kind === 'rejected') {
      const committed = await commitEvent(d, requestId, capabilityFailed(nowIso(d), capability.rejection), { stale: 'keep', source: 'relay' });
      return skipped(capability.rejection.code, committed.after, 'remove');
    }
  }

  const published = await publishPrepared(d, record, entry.stateDataJson, 'relay');
  switch (published.outcome) {
    case 'published':
    case 'publish_uncertain':
      await d.store.removeOutbox(requestId);
      settings.onPublished(published.record);
      return { requestId, ...published };
    case 'already_publishing':
      await d.store.removeOutbox(requestId);
      return { requestId, ...published };
    case 'not_sent':
      await d.store.deferOutbox(requestId, new Date(d.now().getTime() + backoffMs(settings, entry.attempts)));
      return { requestId, ...published };
  }
}

/** relayEntry that reports instead of throwing: a loop must outlive one entry's store failure. */
async function relayReported(d: ResolvedDeps, settings: Settings, entry: OutboxEntry): Promise<RelayResult | undefined> {
  try {
    const result = await relayEntry(d, settings, entry);
    settings.metrics.onPublication?.(result.outcome === 'skipped' ? 'skipped' : result.outcome);
    return result;
  } catch (error) {
    d.logger.error({ request_id: entry.requestId, code: MasterRunnerError.isInstance(error) ? error.code : 'internal' }, 'an outbox entry could not be relayed; it is retried when its claim lapses');
    return undefined;
  }
}

/**
 * One pass over the outbox: claims and relays every due entry (each at most
 * once in the pass), `concurrency` at a time, and returns what happened to
 * each. An entry that failed with a store error is left to its lease and not
 * reported. For tests and the CLI; a service runs startOutboxRelay.
 */
export async function relayOnce(deps: MasterDeps, options: Omit<RelayOptions, 'signal'> = {}): Promise<RelayResult[]> {
  const d = resolveDeps(deps);
  const settings = settingsOf(options);
  const seen = new Set<string>();
  const results: RelayResult[] = [];
  for (;;) {
    const claimed = await d.store.claimOutbox({ limit: settings.concurrency, now: d.now(), leaseMs: settings.leaseMs });
    const fresh = claimed.filter((entry) => !seen.has(entry.requestId));
    // Handled once already in this pass (due again at once): hand its claim back instead of holding it for a lease.
    for (const entry of claimed) if (seen.has(entry.requestId)) await d.store.deferOutbox(entry.requestId, d.now());
    if (fresh.length === 0) return results;
    for (const entry of fresh) seen.add(entry.requestId);
    for (const result of await Promise.all(fresh.map((entry) => relayReported(d, settings, entry)))) {
      if (result !== undefined) results.push(result);
    }
  }
}

/**
 * The relay as a service loop: keeps up to `concurrency` entries in hand,
 * claims more as slots free up, and pauses `idleMs` when nothing is due
 * (wake() cuts the pause short). On abort it takes no new entry, finishes
 * the ones in hand and resolves `done`.
 */
export function startOutboxRelay(deps: MasterDeps, options: RelayOptions): OutboxRelay {
  const d = resolveDeps(deps);
  const settings = settingsOf(options);
  const { signal } = options;
  const inHand = new Set<Promise<unknown>>();
  let woken = false;
  let wakeWaiter: (() => void) | undefined;

  const wake = (): void => {
    woken = true;
    wakeWaiter?.();
  };

  /** Resolves on wake(), abort, an entry in hand finishing (when `onSlot`), or after `ms` (when given). */
  const pause = (ms: number | undefined, onSlot: boolean): Promise<void> => {
    if (signal.aborted || woken) return Promise.resolve();
    return new Promise((resolve) => {
      let settled = false;
      const finish = (): void => {
        // Called by whichever comes first; a late call must not unhook a later pause.
        if (settled) return;
        settled = true;
        if (timer !== undefined) clearTimeout(timer);
        signal.removeEventListener('abort', finish);
        if (wakeWaiter === finish) wakeWaiter = undefined;
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(finish, ms);
      signal.addEventListener('abort', finish, { once: true });
      wakeWaiter = finish;
      if (onSlot) for (const handling of inHand) void handling.then(finish);
    });
  };

  const done = (async () => {
    while (!signal.aborted) {
      woken = false;
      const free = settings.concurrency - inHand.size;
      let claimed: OutboxEntry[] = [];
      if (free > 0) {
        try {
          claimed = await d.store.claimOutbox({ limit: free, now: d.now(), leaseMs: settings.leaseMs });
        } catch (error) {
          d.logger.error({ code: MasterRunnerError.isInstance(error) ? error.code : 'internal' }, 'the outbox could not be read; trying again after the idle pause');
        }
      }
      for (const entry of claimed) {
        const handling: Promise<unknown> = relayReported(d, settings, entry).finally(() => inHand.delete(handling));
        inHand.add(handling);
      }
      if (inHand.size >= settings.concurrency) await pause(undefined, true);
      else if (claimed.length === 0) await pause(settings.idleMs, false);
    }
    await Promise.all(inHand);
  })();

  return { done, wake };
}
