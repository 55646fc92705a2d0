import type { Observation } from '@oduflow/protocol';

/*
 * When the poller asks about each request again: in memory only (a restart
 * polls everything once, which is safe: status is read-only). A request seen
 * for the first time is due at once (a fresh publication is polled soon).
 * After a poll whose answer says the same as the one before (still
 * `running`, still `not_started`, the same failure), the interval grows by
 * `factor` up to `maxIntervalMs`; a changed answer starts again from
 * `minIntervalMs`. Every interval is jittered (±`jitter`), so requests
 * published together do not stay in lockstep. An entry costs one small
 * object per outstanding request; a request no walk saw any more is dropped.
 */

export interface BackoffOptions {
  /** The first interval, and the one after a changed answer (ms; default 2 000). */
  readonly minIntervalMs?: number;
  /** The cap (ms; default 60 000). */
  readonly maxIntervalMs?: number;
  /** Growth after an unchanged answer (default 2). */
  readonly factor?: number;
  /** Relative jitter of every interval, in [0, 1) (default 0.2). */
  readonly jitter?: number;
  /** In [0, 1); tests pin it. */
  readonly random?: () => number;
}

interface Entry {
  dueAtMs: number;
  intervalMs: number;
  /** What the last poll saw, without its time ('' before the first). */
  lastSeen: string;
  /** The walk that last saw the request. */
  walk: number;
}

function observationKey(observed: Observation): string {
  const { at: _at, ...what } = observed;
  return JSON.stringify(what);
}

export class PollSchedule {
  readonly #entries = new Map<string, Entry>();
  readonly #min: number;
  readonly #max: number;
  readonly #factor: number;
  readonly #jitter: number;
  readonly #random: () => number;

  constructor(options: BackoffOptions = {}) {
    this.#min = options.minIntervalMs ?? 2_000;
    this.#max = Math.max(this.#min, options.maxIntervalMs ?? 60_000);
    this.#factor = options.factor ?? 2;
    this.#jitter = options.jitter ?? 0.2;
    this.#random = options.random ?? Math.random;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** A walk saw this request: it is due now when it is new, else when its interval says. */
  seen(requestId: string, walk: number, nowMs: number): boolean {
    const entry = this.#entries.get(requestId);
    if (entry === undefined) {
      this.#entries.set(requestId, { dueAtMs: nowMs, intervalMs: this.#min, lastSeen: '', walk });
      return true;
    }
    entry.walk = walk;
    return entry.dueAtMs <= nowMs;
  }

  /** Records a poll's answer and schedules the next one. */
  polled(requestId: string, observed: Observation | undefined, nowMs: number): void {
    const entry = this.#entries.get(requestId);
    if (entry === undefined) return;
    const key = observed === undefined ? '' : observationKey(observed);
    entry.intervalMs = key !== '' && key === entry.lastSeen ? Math.min(this.#max, entry.intervalMs * this.#factor) : this.#min;
    entry.lastSeen = key;
    const spread = entry.intervalMs * this.#jitter * (2 * this.#random() - 1);
    entry.dueAtMs = nowMs + Math.max(0, Math.round(entry.intervalMs + spread));
  }

  /** Drops a request the poller no longer needs to ask about. */
  forget(requestId: string): void {
    this.#entries.delete(requestId);
  }

  /** Drops every request the walk `walk` did not see (settled, or gone). */
  pruneUnseen(walk: number): void {
    for (const [id, entry] of this.#entries) if (entry.walk !== walk) this.#entries.delete(id);
  }

  /** The requests due at `nowMs`. */
  due(nowMs: number): string[] {
    const ids: string[] = [];
    for (const [id, entry] of this.#entries) if (entry.dueAtMs <= nowMs) ids.push(id);
    return ids;
  }

  /** When the next request falls due (undefined: none known). */
  nextDueAtMs(): number | undefined {
    let next: number | undefined;
    for (const entry of this.#entries.values()) if (next === undefined || entry.dueAtMs < next) next = entry.dueAtMs;
    return next;
  }
}
