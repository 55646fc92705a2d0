import { isProtocolRecord } from '@oduflow/protocol';
import { setTimeout as sleep } from 'node:timers/promises';
import { commitEvent, nowIso } from './commit.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { isPlainObject } from './plain-object.js';
import { statusEvent } from './poll.js';
import type { SaltEventSource, SaltFailureReason } from './salt-client.js';

/*
 * Records an `oduflow_job.run` return the moment the master's event bus
 * carries it (salt-api `GET /events`), so the common case needs no poll.
 * Salt fires `salt/job/<jid>/ret/<minion id>` for every return it receives
 * (salt/utils/job.py store_job, before the job cache is written), with
 * `{jid, id, fun, fun_args, return, retcode, ...}`.
 *
 * A return is recorded only when it proves something exactly as a poll
 * answer would: its JID names a record of this store (store.getByJid), the
 * returning minion is that record's target, and the answer validates as a
 * status answer bound to the record (parseStatusAnswer, through the same
 * statusEvent the poller uses). Everything else is ignored and left to the
 * poller: a return for an unknown JID or from another minion, an error
 * answer, a malformed answer or a Salt-level string, another function's
 * return, any other event. The commit is commitEvent's unit, so a terminal
 * result already stored is never overwritten.
 *
 * The stream is a shortcut, never the source of truth: a dropped or
 * restarted stream reconnects with jittered backoff, and whatever it missed
 * is found by the poller.
 */

const RETURN_TAG = /^salt\/job\/([0-9]{20})\/ret\/([^/]+)$/;

/** Why an event was not recorded. */
export type IgnoredEvent = 'not_a_return' | 'other_function' | 'malformed' | 'unknown_jid' | 'other_minion' | 'not_a_status_answer';

export interface EventRecorderMetrics {
  /** The stream opened (true) or ended (false). */
  onConnected?(connected: boolean): void;
  /** A connection ended and another is about to be tried, with why. */
  onReconnect?(reason: SaltFailureReason | 'ended'): void;
  /**
   * A return was recorded: committed (the record changed) or unchanged (it
   * already said so), `durationMs` after the event arrived on the stream.
   */
  onRecorded?(outcome: 'committed' | 'unchanged', durationMs: number): void;
  onIgnored?(why: IgnoredEvent): void;
}

export interface EventRecorderOptions {
  readonly signal: AbortSignal;
  /** The salt-api client (its followEvents). */
  readonly source: SaltEventSource;
  /** First pause before reconnecting (ms; default 500); doubles per failed try up to `maxBackoffMs`. */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
  readonly random?: () => number;
  readonly metrics?: EventRecorderMetrics;
}

export interface EventRecorder {
  /** Resolves once the signal aborted and the returns being recorded are committed. */
  readonly done: Promise<void>;
}

/** Records one event from the stream when it is a valid `run` return for a record of this store. */
export async function recordEvent(d: ResolvedDeps, raw: unknown): Promise<'committed' | 'unchanged' | IgnoredEvent> {
  if (!isPlainObject(raw) || typeof raw['tag'] !== 'string') return 'not_a_return';
  const match = RETURN_TAG.exec(raw['tag']);
  const data = raw['data'];
  if (match === null) return 'not_a_return';
  if (!isPlainObject(data) || data['fun'] !== 'oduflow_job.run') return 'other_function';
  const [, jid, minionId] = match as unknown as [string, string, string];
  if (data['jid'] !== jid || data['id'] !== minionId || typeof data['retcode'] !== 'number' || !Object.hasOwn(data, 'return')) return 'malformed';
  const record = await d.store.getByJid(jid);
  if (record === undefined || !isProtocolRecord(record)) return 'unknown_jid';
  if (record.minion_id !== minionId) return 'other_minion';
  const event = statusEvent(record, { kind: 'returned', retcode: data['retcode'], ret: data['return'] }, nowIso(d));
  if (event.type !== 'observed') return 'not_a_status_answer';
  const committed = await commitEvent(d, record.request_id, event, { stale: 'keep', repeat: 'skip', source: 'event_stream' });
  return committed.changed ? 'committed' : 'unchanged';
}

export function startEventRecorder(deps: MasterDeps, options: EventRecorderOptions): EventRecorder {
  const d = resolveDeps(deps);
  const minBackoffMs = options.minBackoffMs ?? 500;
  const maxBackoffMs = Math.max(minBackoffMs, options.maxBackoffMs ?? 30_000);
  const random = options.random ?? Math.random;
  const pending = new Set<Promise<void>>();
  const metrics = options.metrics;

  const onEvent = (raw: unknown): void => {
    const arrivedAt = performance.now();
    const work = recordEvent(d, raw).then(
      (outcome) => {
        if (outcome === 'committed' || outcome === 'unchanged') metrics?.onRecorded?.(outcome, performance.now() - arrivedAt);
        else metrics?.onIgnored?.(outcome);
      },
      (error: unknown) => {
        d.logger.error({ code: MasterRunnerError.isInstance(error) ? error.code : 'internal' }, 'a return from the event stream could not be recorded');
      },
    );
    pending.add(work);
    void work.finally(() => pending.delete(work));
  };

  const done = (async () => {
    let failures = 0;
    while (!options.signal.aborted) {
      // Set by onOpen during the await: widened so that flow analysis does not read it as the constant false.
      let opened = false as boolean;
      const end = await options.source.followEvents(onEvent, {
        signal: options.signal,
        onOpen: () => {
          opened = true;
          metrics?.onConnected?.(true);
        },
      });
      if (opened) metrics?.onConnected?.(false);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the signal may abort during the await above
      if (end.kind === 'aborted' || options.signal.aborted) break;
      failures = opened ? 1 : failures + 1;
      const reason = end.kind === 'failed' ? end.reason : 'ended';
      metrics?.onReconnect?.(reason);
      d.logger.warn({ reason }, 'the salt-api event stream ended; reconnecting');
      const windowMs = Math.min(maxBackoffMs, minBackoffMs * 2 ** (failures - 1));
      try {
        await sleep(Math.round(windowMs * (0.5 + random() / 2)), undefined, { signal: options.signal });
      } catch {
        break; // aborted while waiting
      }
    }
    await Promise.allSettled([...pending]);
  })();
  return { done };
}
