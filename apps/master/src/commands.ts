import {
  dispatch,
  poll,
  pollAll,
  preflight,
  publishPending,
  reconcile,
  validateDispatchInput,
  isRecordId,
  MasterRunnerError,
  type DispatchResult,
  type MasterDeps,
  type MasterRunnerErrorDetail,
  type PendingResult,
  type PollResult,
} from '@oduflow/master-runner';
import { NO_HISTORY, isBlocking, isMinionId, isPollable, type RequestRecord } from '@oduflow/protocol';
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXIT, type ExitCode } from './exit-codes.js';
import type { Report, Row } from './output.js';
import { readStateDataFile } from './state-data-file.js';
import { historyRow, observationText, reasonDetail, recordDetail, recordRow } from './views.js';
import { withExistingStore, withMaster, type Wiring } from './wiring.js';

/*
 * One function per CLI command: validate, call the library, shape a Report
 * and choose the exit status. No protocol rules live here.
 */

export interface CommandResult {
  readonly report: Report;
  readonly exitCode: ExitCode;
}

function rowOf(record: RequestRecord, extra: Row = {}): Row {
  return { ...extra, ...recordRow(record) };
}

/** A request id operand or flag: a canonical request UUID, or the name of a legacy record. */
function requestIdInput(value: string): string {
  if (!isRecordId(value)) throw new MasterRunnerError('invalid_input', 'not a request id', { detail: 'invalid_request_id' });
  return value;
}

function minionIdInput(value: string): string {
  if (!isMinionId(value)) throw new MasterRunnerError('invalid_input', 'not a minion id (client-<uuid>)', { detail: 'invalid_minion_id' });
  return value;
}

function notFound(): never {
  throw new MasterRunnerError('not_found', 'no record with that request id');
}

function exitForRecords(records: readonly RequestRecord[]): ExitCode {
  return records.some(isBlocking) ? EXIT.unresolved : EXIT.ok;
}

export interface DispatchFlags {
  readonly minion: string;
  readonly profile: string;
  readonly stateDataFile?: string;
  readonly requestId?: string;
}

export async function dispatchCommand(w: Wiring, flags: DispatchFlags): Promise<CommandResult> {
  const stateDataJson = flags.stateDataFile === undefined ? undefined : readStateDataFile(flags.stateDataFile);
  // Validate everything before any credentials are read or the store is opened.
  const valid = validateDispatchInput(
    {
      minionId: flags.minion,
      profile: flags.profile,
      ...(stateDataJson === undefined ? {} : { stateDataJson }),
      ...(flags.requestId === undefined ? {} : { requestId: flags.requestId }),
    },
    randomUUID,
  );
  const result = await withMaster(w, (deps) =>
    dispatch(deps, { minionId: valid.minionId, profile: valid.profile, stateDataJson: valid.stateDataJson, requestId: valid.requestId }),
  );
  return {
    report: { title: `dispatch: ${result.outcome}`, summary: dispatchSummary(result), rows: [rowOf(result.record)] },
    exitCode: dispatchExit(result),
  };
}

function dispatchSummary(result: DispatchResult): Row {
  switch (result.outcome) {
    case 'publish_uncertain':
    case 'not_sent':
      return { outcome: result.outcome, reason: result.failure, reason_detail: null };
    case 'rejected':
      return { outcome: result.outcome, reason: result.rejection.code, reason_detail: reasonDetail(result.rejection) };
    case 'published':
    case 'already_publishing':
    case 'existing':
      return { outcome: result.outcome, reason: null, reason_detail: null };
  }
}

/**
 * A repeated dispatch (`existing`) reports what the request is now: refused
 * when it was rejected, unresolved while it still blocks its target (this
 * call did not publish it; poll it), done when it is settled.
 */
function dispatchExit(result: DispatchResult): ExitCode {
  switch (result.outcome) {
    case 'published':
      return EXIT.ok;
    case 'rejected':
      return EXIT.refused;
    case 'publish_uncertain':
    case 'not_sent':
    case 'already_publishing':
      return EXIT.unresolved;
    case 'existing':
      if (result.record.state === 'rejected') return EXIT.refused;
      return isBlocking(result.record) ? EXIT.unresolved : EXIT.ok;
  }
}

export interface PublishPendingFlags {
  readonly requestId?: string;
  readonly stateDataFile?: string;
}

export async function publishPendingCommand(w: Wiring, flags: PublishPendingFlags): Promise<CommandResult> {
  if (flags.requestId !== undefined) requestIdInput(flags.requestId);
  const stateDataJson = flags.stateDataFile === undefined ? undefined : readStateDataFile(flags.stateDataFile);
  const results = await withMaster(w, (deps) =>
    publishPending(deps, {
      ...(flags.requestId === undefined ? {} : { requestId: flags.requestId }),
      ...(stateDataJson === undefined ? {} : { stateDataJson }),
    }),
  );
  const allPublished = results.every((r) => r.outcome === 'published');
  return {
    report: {
      title: `publish-pending: ${results.length} request(s)`,
      rows: results.map((r) => rowOf(r.record, { outcome: r.outcome, outcome_reason: pendingReason(r) })),
    },
    exitCode: allPublished ? EXIT.ok : EXIT.unresolved,
  };
}

function pendingReason(result: PendingResult): string | null {
  switch (result.outcome) {
    case 'published':
      return null;
    case 'publish_uncertain':
    case 'not_sent':
      return result.failure;
    case 'skipped':
      return result.skip;
  }
}

export interface PollFlags {
  readonly requestId?: string;
  readonly watch?: boolean;
  readonly interval?: string;
  readonly timeout?: string;
}

async function pollOnce(deps: MasterDeps, requestId: string | undefined): Promise<PollResult[]> {
  return requestId === undefined ? pollAll(deps) : [await poll(deps, requestId)];
}

export const DEFAULT_WATCH_TIMEOUT_MS = 15 * 60_000;

type StopReason = 'timeout' | 'interrupted';

/**
 * Set when a watch stopped while a round was still waiting for salt-api: the
 * executable exits at once instead of waiting for it (every store write is
 * atomic, so leaving mid-round is what a crash would do, and is safe).
 */
export const abandonedWork = { value: false };

interface WatchStop {
  readonly promise: Promise<StopReason>;
  reason(): StopReason | undefined;
  dispose(): void;
}

function watchStop(timeoutMs: number): WatchStop {
  let reason: StopReason | undefined;
  let resolve: (r: StopReason) => void = () => undefined;
  const promise = new Promise<StopReason>((r) => (resolve = r));
  const fire = (r: StopReason): void => {
    if (reason !== undefined) return;
    reason = r;
    resolve(r);
  };
  const timer = setTimeout(() => fire('timeout'), timeoutMs);
  const onSignal = (): void => fire('interrupted');
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    promise,
    reason: () => reason,
    dispose: () => {
      clearTimeout(timer);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** `work`'s value, or undefined when the watch stops first (the work is then abandoned). */
async function unlessStopped<T>(work: Promise<T>, stop: WatchStop): Promise<{ readonly value: T } | undefined> {
  const wrapped = work.then((value) => ({ value }));
  wrapped.catch(() => undefined); // a failure after the stop is of no interest
  const won = await Promise.race([wrapped, stop.promise.then(() => undefined)]);
  if (won === undefined) abandonedWork.value = true;
  return won;
}

function positiveMs(value: string, min: number, what: string, detail: MasterRunnerErrorDetail): number {
  const ms = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(ms) || ms < min) {
    throw new MasterRunnerError('invalid_input', `${what} must be at least ${min} milliseconds`, { detail });
  }
  return ms;
}

/** What a `poll --watch` round leaves: the caller prints it on stderr, as a line (tables) or a JSON line (--json). */
export interface RoundProgress {
  readonly round: number;
  readonly settled: number;
  readonly waiting: readonly { readonly request_id: string; readonly state: string }[];
}

/**
 * One round, or with --watch: the requests selected by the first round (never
 * ones dispatched later) polled again until every one of them is settled, the
 * timeout passes or SIGINT/SIGTERM arrives; the last two print the latest
 * report and exit 3. `progress` gets every round.
 */
export async function pollCommand(w: Wiring, flags: PollFlags, progress?: (round: RoundProgress) => void): Promise<CommandResult> {
  const intervalMs = positiveMs(flags.interval ?? '5000', 100, 'the watch interval', 'invalid_interval');
  const timeoutMs = positiveMs(flags.timeout ?? String(DEFAULT_WATCH_TIMEOUT_MS), 1, 'the watch timeout', 'invalid_timeout');
  if (flags.requestId !== undefined) requestIdInput(flags.requestId);
  const latest = new Map<string, PollResult>();
  let stopped: StopReason | undefined;
  await withMaster(w, async (deps) => {
    if (flags.watch !== true) {
      for (const r of await pollOnce(deps, flags.requestId)) latest.set(r.record.request_id, r);
      return;
    }
    const stop = watchStop(timeoutMs);
    try {
      const first = await unlessStopped(pollOnce(deps, flags.requestId), stop);
      if (first === undefined) return;
      for (const r of first.value) latest.set(r.record.request_id, r);
      for (let round = 1; ; round += 1) {
        const waiting = [...latest.values()].filter((r) => isPollable(r.record));
        progress?.({
          round,
          settled: latest.size - waiting.length,
          waiting: waiting.map((r) => ({ request_id: r.record.request_id, state: r.record.state })),
        });
        if (waiting.length === 0) return;
        const ac = new AbortController();
        const pause = sleep(intervalMs, undefined, { signal: ac.signal }).catch(() => undefined);
        await Promise.race([pause, stop.promise]);
        ac.abort();
        if (stop.reason() !== undefined) return;
        for (const r of waiting) {
          const next = await unlessStopped(poll(deps, r.record.request_id), stop);
          if (next === undefined) return;
          latest.set(next.value.record.request_id, next.value);
        }
      }
    } finally {
      stopped = stop.reason();
      stop.dispose();
    }
  });
  const results = [...latest.values()];
  return {
    report: {
      title: `poll: ${results.length} request(s)${stopped === undefined ? '' : ` (watch stopped: ${stopped})`}`,
      ...(stopped === undefined ? {} : { summary: { stopped } }),
      rows: results.map((r) => rowOf(r.record, { outcome: r.outcome, observed: r.observed === undefined ? null : observationText(r.observed) })),
    },
    exitCode: stopped === undefined ? exitForRecords(results.map((r) => r.record)) : EXIT.unresolved,
  };
}

export async function showCommand(w: Wiring, requestId: string): Promise<CommandResult> {
  requestIdInput(requestId);
  const found = await withExistingStore(
    w,
    async (store) => {
      const record = await store.get(requestId);
      return record === undefined ? undefined : { record, history: (await store.history(requestId)) ?? NO_HISTORY };
    },
    () => undefined,
  );
  if (found === undefined) notFound();
  return {
    report: { detail: { ...recordDetail(found.record) }, history: { entries: found.history.entries.map(historyRow), dropped: found.history.dropped } },
    exitCode: EXIT.ok,
  };
}

export interface ListFlags {
  readonly unresolved?: boolean;
  readonly minion?: string;
}

export async function listCommand(w: Wiring, flags: ListFlags): Promise<CommandResult> {
  if (flags.minion !== undefined) minionIdInput(flags.minion);
  const records = await withExistingStore(
    w,
    (store) =>
      store.list({
        ...(flags.unresolved === true ? { unresolved: true } : {}),
        ...(flags.minion === undefined ? {} : { minionId: flags.minion }),
      }),
    () => [],
  );
  return { report: { rows: records.map((r) => rowOf(r)) }, exitCode: EXIT.ok };
}

export interface ReconcileFlags {
  readonly reason: string;
  readonly actor?: string;
}

export async function reconcileCommand(w: Wiring, requestId: string, flags: ReconcileFlags): Promise<CommandResult> {
  requestIdInput(requestId);
  const actor = flags.actor ?? userInfo().username;
  const record = await withExistingStore(
    w,
    (store) => reconcile({ store, salt: noSalt, logger: w.logger }, requestId, { reason: flags.reason, actor }),
    notFound,
  );
  return { report: { title: 'reconciled', detail: { ...recordDetail(record) } }, exitCode: EXIT.ok };
}

export async function preflightCommand(w: Wiring): Promise<CommandResult> {
  const report = await withExistingStore(w, (store) => preflight({ store }), () => ({ legacy: [], unresolved: [], clean: true }));
  // Legacy records say what they say: their target (or that they name none) and the state they recorded.
  const rows = [
    ...report.legacy.map((r) =>
      rowOf(r, {
        finding: 'legacy',
        recorded_state: r.recorded_state,
        note: r.minion_id === null ? 'names no target: blocks every target' : 'blocks its target',
      }),
    ),
    ...report.unresolved.map((r) => rowOf(r, { finding: 'unresolved', recorded_state: null, note: 'blocks its target' })),
  ];
  return {
    report: {
      title: report.clean ? 'preflight: no legacy records' : 'preflight: legacy records need reconciliation',
      summary: { clean: report.clean, legacy: report.legacy.length, unresolved: report.unresolved.length },
      rows,
    },
    exitCode: report.clean ? EXIT.ok : EXIT.unresolved,
  };
}

/** Reconciliation never talks to Salt; this makes any accidental use loud. */
const noSalt: MasterDeps['salt'] = {
  publish: () => Promise.reject(new MasterRunnerError('internal', 'reconcile must not publish')),
  call: () => Promise.reject(new MasterRunnerError('internal', 'reconcile must not call Salt')),
};
