import type { RolloutReport } from '@oduflow/master-runner';
import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';

/*
 * Live rollout reports for the dashboard's event streams. One watch per
 * rollout run that someone is looking at, shared by every stream that looks
 * at it: it re-reads the run's checkpoints when its directory changes
 * (inotify), when a request of the rollout is committed by this service,
 * and, as a safety net for a missed file event, once a second while the run
 * is running — so the cost is one read per watched run, however many
 * dashboards follow it. A listener hears a report only when it changed.
 */

export interface RolloutWatch {
  /** Calls `listener` with the report now and after every change, until the returned function is called. */
  subscribe(runId: string, listener: (report: RolloutReport) => void): () => void;
  /** A request was committed: re-read the runs it belongs to. */
  requestChanged(requestId: string): void;
  /** Runs watched now. */
  readonly watched: number;
  close(): void;
}

export interface RolloutWatchOptions {
  readonly workspace: string;
  /** Reads a run's report; undefined when the run does not exist. Throws when it cannot be read. */
  readonly read: (runId: string) => RolloutReport | undefined;
  /** The safety-net re-read while a run is running (ms; default 1000). */
  readonly everyMs?: number;
  /** How long a burst of changes is gathered into one read (ms; default 50). */
  readonly settleMs?: number;
  readonly onError?: (runId: string, error: unknown) => void;
}

interface Watched {
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

  const refresh = (runId: string, w: Watched): void => {
    let report: RolloutReport | undefined;
    try {
      report = options.read(runId);
    } catch (error) {
      options.onError?.(runId, error);
      return;
    }
    if (report === undefined) return;
    if (report.status !== 'running') clearInterval(w.interval);
    const text = JSON.stringify(report);
    if (text === w.last) return;
    w.last = text;
    w.report = report;
    w.requestIds = new Set(report.targets.flatMap((row) => (row.request_id === null ? [] : [row.request_id])));
    for (const listener of [...w.listeners]) listener(report);
  };

  const schedule = (runId: string, w: Watched): void => {
    if (w.pending !== undefined) return;
    w.pending = setTimeout(() => {
      w.pending = undefined;
      refresh(runId, w);
    }, settleMs);
    w.pending.unref();
  };

  const start = (runId: string): Watched => {
    const w: Watched = { listeners: new Set(), last: undefined, report: undefined, requestIds: new Set(), interval: undefined, pending: undefined, fsWatcher: undefined };
    runs.set(runId, w);
    refresh(runId, w);
    if (w.report === undefined || w.report.status === 'running') {
      w.interval = setInterval(() => refresh(runId, w), everyMs);
      w.interval.unref();
    }
    try {
      // Checkpoints land in the run's directory by atomic rename: each one is a directory event.
      w.fsWatcher = watch(join(options.workspace, 'runs', runId), { persistent: false }, () => schedule(runId, w));
      w.fsWatcher.on('error', () => {
        w.fsWatcher?.close();
        w.fsWatcher = undefined;
      });
    } catch {
      // No directory yet (or no inotify): the interval still reads it.
    }
    return w;
  };

  return {
    subscribe(runId, listener) {
      const w = runs.get(runId) ?? start(runId);
      w.listeners.add(listener);
      if (w.report !== undefined) listener(w.report);
      return () => {
        w.listeners.delete(listener);
        if (w.listeners.size === 0 && runs.get(runId) === w) {
          stopTimers(w);
          w.fsWatcher?.close();
          runs.delete(runId);
        }
      };
    },
    requestChanged(requestId) {
      for (const [runId, w] of runs) if (w.requestIds.has(requestId)) schedule(runId, w);
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
