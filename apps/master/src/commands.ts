import {
  dispatch,
  poll,
  pollAll,
  preflight,
  publishPending,
  reconcile,
  validateDispatchInput,
  MasterRunnerError,
  type MasterDeps,
  type PollResult,
} from '@oduflow/master-runner';
import { isBlocking, isPollable, type RequestRecord } from '@oduflow/protocol';
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXIT, type ExitCode } from './exit-codes.js';
import type { Report, Row } from './output.js';
import { readStateDataFile } from './state-data-file.js';
import { recordDetail, recordRow } from './views.js';
import { withMaster, withStore, type Wiring } from './wiring.js';

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
  // A repeated dispatch reports what the first one did: a rejected request stays refused.
  const rejected = result.outcome === 'rejected' || (result.outcome === 'existing' && result.record.state === 'rejected');
  const exitCode: ExitCode = rejected
    ? EXIT.refused
    : result.outcome === 'published' || result.outcome === 'existing'
      ? EXIT.ok
      : EXIT.unresolved;
  return {
    report: { title: `dispatch: ${result.outcome}`, summary: { outcome: result.outcome, reason: result.reason ?? null }, rows: [rowOf(result.record)] },
    exitCode,
  };
}

export interface PublishPendingFlags {
  readonly requestId?: string;
  readonly stateDataFile?: string;
}

export async function publishPendingCommand(w: Wiring, flags: PublishPendingFlags): Promise<CommandResult> {
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
      rows: results.map((r) => rowOf(r.record, { outcome: r.outcome, outcome_reason: r.reason ?? null })),
    },
    exitCode: allPublished ? EXIT.ok : EXIT.unresolved,
  };
}

export interface PollFlags {
  readonly requestId?: string;
  readonly watch?: boolean;
  readonly interval?: string;
}

async function pollOnce(deps: MasterDeps, requestId: string | undefined): Promise<PollResult[]> {
  return requestId === undefined ? pollAll(deps) : [await poll(deps, requestId)];
}

export async function pollCommand(w: Wiring, flags: PollFlags): Promise<CommandResult> {
  const intervalMs = Number(flags.interval ?? '5000');
  if (!Number.isSafeInteger(intervalMs) || intervalMs < 100) {
    throw new MasterRunnerError('invalid_input', 'the watch interval must be at least 100 milliseconds', { detail: 'invalid_interval' });
  }
  const results = await withMaster(w, async (deps) => {
    const latest = new Map<string, PollResult>();
    for (;;) {
      for (const r of await pollOnce(deps, flags.requestId)) latest.set(r.record.request_id, r);
      const waiting = [...latest.values()].some((r) => isPollable(r.record));
      if (flags.watch !== true || !waiting) return [...latest.values()];
      await sleep(intervalMs);
    }
  });
  return {
    report: {
      title: `poll: ${results.length} request(s)`,
      rows: results.map((r) => rowOf(r.record, { outcome: r.outcome, observed: r.observed ?? null })),
    },
    exitCode: exitForRecords(results.map((r) => r.record)),
  };
}

export async function showCommand(w: Wiring, requestId: string): Promise<CommandResult> {
  const record = await withStore(w, (store) => store.get(requestId));
  if (record === undefined) throw new MasterRunnerError('not_found', 'no record with that request id');
  return { report: { detail: { ...recordDetail(record) } }, exitCode: EXIT.ok };
}

export interface ListFlags {
  readonly unresolved?: boolean;
  readonly minion?: string;
}

export async function listCommand(w: Wiring, flags: ListFlags): Promise<CommandResult> {
  const records = await withStore(w, (store) =>
    store.list({
      ...(flags.unresolved === true ? { unresolved: true } : {}),
      ...(flags.minion === undefined ? {} : { minionId: flags.minion }),
    }),
  );
  return { report: { rows: records.map((r) => rowOf(r)) }, exitCode: EXIT.ok };
}

export interface ReconcileFlags {
  readonly reason: string;
  readonly actor?: string;
}

export async function reconcileCommand(w: Wiring, requestId: string, flags: ReconcileFlags): Promise<CommandResult> {
  const actor = flags.actor ?? userInfo().username;
  const record = await withStore(w, (store) => reconcile({ store, salt: noSalt, logger: w.logger }, requestId, { reason: flags.reason, actor }));
  return { report: { title: 'reconciled', detail: { ...recordDetail(record) } }, exitCode: EXIT.ok };
}

export async function preflightCommand(w: Wiring): Promise<CommandResult> {
  const report = await withStore(w, (store) => preflight({ store }));
  const rows = [
    ...report.legacy.map((r) => rowOf(r, { finding: 'legacy' })),
    ...report.unresolved.map((r) => rowOf(r, { finding: 'unresolved' })),
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
