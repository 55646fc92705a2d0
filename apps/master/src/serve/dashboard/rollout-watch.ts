import type { RolloutReport } from '@oduflow/master-runner';
import { watch, type FSWatcher } from 'node:fs';

/*
 * Live rollout reports for the dashboard's event streams. One watch per
 * rollout run that someone is looking at, shared by every stream that looks
 * at it: it re-reads the run's checkpoints when its directory changes
 * (inotify), when a request of the rollout is committed by this service,
 * and, as a safety net for a missed file event, once a second while the run
 * is running — so the cost is one read per watched run, however many
 * dashboards follow it. A listener hears a report only when it changed.
 */

/** How to read one watched rollout: its report now (undefined: gone), and the directory its checkpoints land in, if known. */
export interface WatchedRollout {
  readonly read: () => RolloutReport | undefined | Promise<RolloutReport | undefined>;
  readonly dir?: string;
}

export interface RolloutWatch {
  /** Calls `listener` with the report now and after every change, until the returned function is called. `key` names the rollout; its first subscriber says how to read it. */
  subscribe(key: string, source: WatchedRollout, listener: (report: RolloutReport) => void): () => void;
  /** A request was committed: re-read the runs it belongs to. */
  requestChanged(requestId: string): void;
  /** Runs watched now. */
  readonly watched: number;
  close(): void;
}

export interface RolloutWatchOptions {
  /** The safety-net re-read while a run is running (ms; default 1000). */
  readonly everyMs?: number;
  /** How long a burst of changes is gathered into one read (ms; default 50). */
  readonly settleMs?: number;
  readonly onError?: (key: string, error: unknown) => void;
}

interface Watched {
  readonly source: WatchedRollout;
  reading: boolean;
  again: boolean;
  readonly listeners: Set<(report: RolloutReport) => void>;
  last: string | undefined;
  report: RolloutReport | undefined;
  requestIds: ReadonlySet<string>;
  interval: NodeJS.Timeout | undefined;
  pending: NodeJS.Timeout | undefined;
  fsWatcher: FSWatcher | undefined;
}

export function createRolloutWatch(options: RolloutWatchOptions): RolloutWatch {
  const runs = new Map<string, Watched>();
  const everyMs = options.everyMs ?? 1_000;
  const settleMs = options.settleMs ?? 50;

  const stopTimers = (w: Watched): void => {
    clearInterval(w.interval);
    clearTimeout(w.pending);
    w.interval = undefined;
    w.pending = undefined;
  };

  const refresh = (key: string, w: Watched): void => {
    // One read at a time per rollout; a change during a read asks for one more.
    if (w.reading) {
      w.again = true;
      return;
    }
    w.reading = true;
    void (async () => {
      try {
        const report = await w.source.read();
        if (report === undefined || runs.get(key) !== w) return;
        if (report.status !== 'running') clearInterval(w.interval);
        const text = JSON.stringify(report);
        if (text === w.last) return;
        w.last = text;
        w.report = report;
        w.requestIds = new Set(report.targets.flatMap((row) => (row.request_id === null ? [] : [row.request_id])));
        for (const listener of [...w.listeners]) listener(report);
      } catch (error) {
        options.onError?.(key, error);
      } finally {
        w.reading = false;
        if (w.again) {
          w.again = false;
          schedule(key, w);
        }
      }
    })();
  };

  const schedule = (key: string, w: Watched): void => {
    if (w.pending !== undefined) return;
    w.pending = setTimeout(() => {
      w.pending = undefined;
      refresh(key, w);
    }, settleMs);
    w.pending.unref();
  };

  const start = (key: string, source: WatchedRollout): Watched => {
    const w: Watched = {
      source,
      reading: false,
      again: false,
      listeners: new Set(),
      last: undefined,
      report: undefined,
      requestIds: new Set(),
      interval: undefined,
      pending: undefined,
      fsWatcher: undefined,
    };
    runs.set(key, w);
    refresh(key, w);
    // Until a read says the run has ended.
    w.interval = setInterval(() => refresh(key, w), everyMs);
    w.interval.unref();
    if (source.dir !== undefined) {
      try {
        // Checkpoints land in the run's directory by atomic rename: each one is a directory event.
        w.fsWatcher = watch(source.dir, { persistent: false }, () => schedule(key, w));
        w.fsWatcher.on('error', () => {
          w.fsWatcher?.close();
          w.fsWatcher = undefined;
        });
      } catch {
        // No directory yet (or no inotify): the interval still reads it.
      }
    }
    return w;
  };

  return {
    subscribe(key, source, listener) {
      const w = runs.get(key) ?? start(key, source);
      w.listeners.add(listener);
      if (w.report !== undefined) listener(w.report);
      return () => {
        w.listeners.delete(listener);
        if (w.listeners.size === 0 && runs.get(key) === w) {
          stopTimers(w);
          w.fsWatcher?.close();
          runs.delete(key);
        }
      };
    },
    requestChanged(requestId) {
      for (const [key, w] of runs) if (w.requestIds.has(requestId)) schedule(key, w);
    },
    get watched() {
      return runs.size;
    },
    close() {
      for (const w of runs.values()) {
        stopTimers(w);
        w.fsWatcher?.close();
      }
      runs.clear();
    },
  };
}
