import { setTimeout as sleep } from 'node:timers/promises';
import type { JobStage, StageContext } from '@oduflow/job-envelope';
import { BLOCKING_STATES, isBlocking, type RequestRecord } from '@oduflow/protocol';
import { checkCapability } from '../capability.js';
import { forEachConcurrently } from '../concurrently.js';
import type { ResolvedDeps } from '../deps.js';
import { dispatch } from '../dispatch.js';
import { MasterRunnerError } from '../errors.js';
import { poll } from '../poll.js';
import { publishPending } from '../publish-pending.js';
import {
  PENDING,
  blockedRow,
  budgetUsedBy,
  notAskedRow,
  pendingRow,
  rejectedRow,
  rowOfRecord,
  type TargetRow,
} from './outcomes.js';
import { rolloutRequestId } from './request-id.js';
import type { RolloutSpec } from './spec.js';
import { ROLLOUT_STATE_VERSION, parseStageState, stateValue, type RolloutStageState } from './stage-state.js';

/*
 * One stage of a rollout: one batch of targets.
 *
 * 1. Fix every target's request id (derived from the rollout and the target)
 *    and checkpoint them before dispatching anything.
 * 2. Dispatch each target through the normal `dispatch` with that request id
 *    (a few at a time). On a re-entry after a crash, dispatch finds the
 *    requests already recorded (`existing`) and publishes nothing; a request
 *    of ours found `prepared` (recorded, provably never published) is
 *    published once through `publishPending`, exactly as an operator would.
 * 3. Poll, read-only, until every request is settled or the stage deadline
 *    passes (what is still open is then `unresolved`).
 * 4. Checkpoint the outcomes and the budget's running total, and fail the
 *    stage with `budget_exceeded` when failed + unresolved outcomes of the
 *    rollout so far exceed the budget: the rollout halts before the next
 *    batch.
 *
 * A dry run dispatches nothing: it reads the target's blockers from the
 * store's unresolved records (no lock file, no write) and asks the minion
 * for its capabilities (a read-only call), and reports what a real run
 * would meet: `skipped` (would be dispatched), `blocked`, `rejected`,
 * `unreachable`, `no_target`.
 *
 * A refusal that dispatch reports as an error (a blocked target, a minion
 * that could not be asked) is an outcome. Any other error (the store, a
 * bug) is not decided here: the stage fails (the envelope records only
 * `stage_exception`, never the error) and the rollout can be resumed.
 *
 * When the rollout is aborted (ctx.signal: a service shutting down), the
 * stage starts no new dispatch or poll, lets those in flight finish (a
 * publication in flight is recorded), saves what it has and stops; the
 * envelope records nothing more, and a resume re-enters the stage as after
 * a crash.
 */

export const ROLLOUT_FAILURE_CODES = ['budget_exceeded'] as const;
export type RolloutFailureCode = (typeof ROLLOUT_FAILURE_CODES)[number];

/** What a stage tells whoever follows the rollout (a progress bar, the service). */
export interface TargetSettled {
  readonly stageId: string;
  readonly index: number;
  readonly row: TargetRow;
}

export interface StageSettings {
  readonly stageTimeoutMs: number;
  readonly pollIntervalMs: number;
  readonly concurrency: number;
  readonly onTarget: (event: TargetSettled) => void;
}

const SAVE_EVERY_MS = 1_000;

function isFinal(row: TargetRow): boolean {
  return row.outcome !== PENDING;
}

/** The error types a stage may log: the class and the closed code, never a message. */
function errorKind(error: unknown): { err_type: string; code: string | null } {
  const type = error instanceof Error ? error.name : typeof error;
  return { err_type: /^[A-Za-z][A-Za-z0-9_]{0,63}$/.test(type) ? type : 'unknown', code: MasterRunnerError.isInstance(error) ? error.code : null };
}

class BatchStage {
  readonly #d: ResolvedDeps;
  readonly #spec: RolloutSpec;
  readonly #settings: StageSettings;
  readonly #ctx: StageContext<RolloutFailureCode>;
  readonly #batch: readonly string[];
  #state: RolloutStageState;
  #savedAt = 0;
  /** Whether a row changed since the last checkpoint (an unchanged batch is not written again). */
  #dirty = true;

  constructor(d: ResolvedDeps, spec: RolloutSpec, settings: StageSettings, ctx: StageContext<RolloutFailureCode>) {
    this.#d = d;
    this.#spec = spec;
    this.#settings = settings;
    this.#ctx = ctx;
    this.#batch = spec.batches[ctx.stageIndex] ?? [];
    this.#state = this.#initialState();
  }

  /** The saved state on a re-entry (its request ids checked against the derivation), else a new one. */
  #initialState(): RolloutStageState {
    const ctx = this.#ctx;
    const requestOf = (target: string): string | null => (this.#spec.dryRun ? null : rolloutRequestId(ctx.jobId, target));
    const fresh: RolloutStageState = {
      version: ROLLOUT_STATE_VERSION,
      profile: this.#spec.profile,
      target_count: this.#spec.targets.length,
      batch_size: this.#spec.batchSize,
      max_unresolved: this.#spec.maxUnresolved,
      targets: this.#batch.map((target) => pendingRow(target, requestOf(target))),
      budget_used: null,
    };
    if (ctx.state === null) return fresh;
    const saved = parseStageState(ctx.state, ctx.stageId);
    const same = saved.targets.length === this.#batch.length && saved.targets.every((row, i) => row.minion_id === this.#batch[i] && row.request_id === requestOf(row.minion_id));
    if (!same) throw new MasterRunnerError('rollout_refused', `the checkpoint of stage ${ctx.stageId} names other targets or requests`, { detail: 'corrupt_checkpoint' });
    return { ...fresh, targets: saved.targets };
  }

  /** Checkpoints the batch: always when `force`, else only what changed, at most once a second (for readers of a running rollout). */
  #save(force: boolean): void {
    const now = performance.now();
    if (!force && (!this.#dirty || now - this.#savedAt < SAVE_EVERY_MS)) return;
    this.#ctx.saveState(stateValue(this.#state));
    this.#savedAt = now;
    this.#dirty = false;
  }

  #set(index: number, row: TargetRow): void {
    const before = this.#state.targets[index];
    if (before !== undefined && JSON.stringify(before) === JSON.stringify(row)) return;
    this.#dirty = true;
    const targets = [...this.#state.targets];
    targets[index] = row;
    this.#state = { ...this.#state, targets };
    if (isFinal(row)) this.#settings.onTarget({ stageId: this.#ctx.stageId, index: this.#ctx.stageIndex, row });
  }

  /** The budget used by the stages before this one (their running total). */
  #budgetBefore(): number {
    const index = this.#ctx.stageIndex;
    if (index === 0) return 0;
    const previousId = this.#spec.stageIds[index - 1] as string;
    const previous = parseStageState(this.#ctx.earlierState(previousId), previousId);
    if (previous.budget_used === null) {
      throw new MasterRunnerError('rollout_refused', `stage ${previousId} succeeded without settling its batch`, { detail: 'corrupt_checkpoint' });
    }
    return previous.budget_used;
  }

  async run(): Promise<void> {
    const budgetBefore = this.#budgetBefore();
    // Every request id is fixed, and durable, before anything is dispatched.
    this.#state = { ...this.#state, targets: this.#state.targets.map((row) => pendingRow(row.minion_id, row.request_id)), budget_used: null };
    this.#save(true);
    const log = this.#d.logger.child({ rollout: this.#ctx.jobId, run_id: this.#ctx.runId, stage: this.#ctx.stageId });
    log.info({ targets: this.#batch.length, entry: this.#ctx.entry, dry_run: this.#spec.dryRun }, 'rollout stage started');
    const { signal } = this.#ctx;
    try {
      if (this.#spec.dryRun) await this.#dryRun();
      else {
        await this.#dispatchAll();
        this.#save(true);
        signal.throwIfAborted();
        await this.#pollUntilSettled();
      }
      signal.throwIfAborted();
    } catch (error) {
      if (signal.aborted) {
        // What the dispatches and polls in flight learned is kept: a resume starts from it.
        if (this.#dirty) this.#save(true);
        log.info('rollout stage stopped: the rollout was aborted; a resume continues from its last checkpoint');
      } else log.error(errorKind(error), 'rollout stage stopped by an error; resume the rollout once it is fixed');
      throw error;
    }
    const used = budgetBefore + budgetUsedBy(this.#state.targets);
    this.#state = { ...this.#state, budget_used: used };
    this.#save(true);
    log.info({ budget_used: used, max_unresolved: this.#spec.maxUnresolved }, 'rollout stage settled');
    if (used > this.#spec.maxUnresolved) this.#ctx.fail('budget_exceeded');
  }

  async #eachTarget(work: (row: TargetRow, index: number) => Promise<void>, which: (row: TargetRow) => boolean): Promise<void> {
    const indexes = this.#state.targets.flatMap((row, index) => (which(row) ? [index] : []));
    // Aborted: no new target is taken; the ones in work finish.
    await forEachConcurrently(indexes, { concurrency: this.#settings.concurrency, signal: this.#ctx.signal }, async ([index]) => {
      const row = this.#state.targets[index as number] as TargetRow;
      await work(row, index as number);
    });
  }

  async #dispatchAll(): Promise<void> {
    await this.#eachTarget(async (row, index) => this.#set(index, await this.#dispatchOne(row)), () => true);
  }

  /** One target through the normal dispatch, with its fixed request id. */
  async #dispatchOne(row: TargetRow): Promise<TargetRow> {
    const requestId = row.request_id as string;
    const { minion_id: minionId } = row;
    const spec = this.#spec;
    try {
      const result = await dispatch(
        this.#d,
        { minionId, profile: spec.profile, requestId, ...(spec.profile === 'custom' ? { stateDataJson: spec.stateDataJson } : {}) },
        { source: 'rollout' },
      );
      if (result.outcome === 'rejected') return rejectedRow(minionId, requestId, result.rejection, result.record.state);
      if (result.outcome === 'existing' && result.record.state === 'prepared') return await this.#publishPrepared(row);
      return rowOfRecord(result.record, false);
    } catch (error) {
      if (!MasterRunnerError.isInstance(error)) throw error;
      switch (error.code) {
        case 'target_blocked':
          return blockedRow(minionId, requestId, { request_id: error.requestId ?? '', state: isBlockingState(error.detail) ? error.detail : 'legacy' });
        case 'minion_unreachable':
          return notAskedRow(minionId, requestId, 'unreachable', typeof error.detail === 'string' ? error.detail : null);
        case 'no_target':
          return notAskedRow(minionId, requestId, 'no_target', null);
        default:
          throw error;
      }
    }
  }

  /**
   * A request of ours recorded but never published (a crash right after the
   * record was written, or a publication that provably sent nothing): the
   * normal publish-pending path publishes it once, with its JID.
   */
  async #publishPrepared(row: TargetRow): Promise<TargetRow> {
    const requestId = row.request_id as string;
    const [result] = await publishPending(this.#d, { requestId, source: 'rollout', ...(this.#spec.profile === 'custom' ? { stateDataJson: this.#spec.stateDataJson } : {}) });
    if (result === undefined) {
      const record = await this.#d.store.get(requestId);
      if (record === undefined) throw new MasterRunnerError('internal', 'a request of this rollout disappeared from the store', { requestId });
      return rowOfRecord(record, false);
    }
    const next = rowOfRecord(result.record, false);
    return result.outcome === 'skipped' ? { ...next, detail: result.skip } : next;
  }

  async #pollUntilSettled(): Promise<void> {
    const deadline = performance.now() + this.#settings.stageTimeoutMs;
    for (;;) {
      await this.#eachTarget(async (row, index) => {
        const polled = await poll(this.#d, row.request_id as string);
        this.#set(index, rowOfRecord(polled.record, false));
      }, (row) => !isFinal(row));
      const open = this.#state.targets.filter((row) => !isFinal(row)).length;
      const left = deadline - performance.now();
      if (open === 0) return;
      if (left <= 0) break;
      this.#save(false);
      this.#ctx.signal.throwIfAborted();
      await sleep(Math.min(this.#settings.pollIntervalMs, left), undefined, { signal: this.#ctx.signal });
    }
    // The deadline passed: what is still open stays open on the record side; the rollout calls it unresolved.
    await this.#eachTarget(async (row, index) => {
      const record = await this.#d.store.get(row.request_id as string);
      this.#set(index, record === undefined ? { ...row, outcome: 'unresolved' } : rowOfRecord(record, true));
    }, (row) => !isFinal(row));
  }

  async #dryRun(): Promise<void> {
    // The blockers of every target at once, read from the unresolved records: no target lock is taken, nothing is written.
    const unresolved = (await this.#d.store.list({ unresolved: true })).filter(isBlocking);
    await this.#eachTarget(async (row, index) => this.#set(index, await this.#dryRunOne(row, unresolved)), () => true);
  }

  async #dryRunOne(row: TargetRow, unresolved: readonly RequestRecord[]): Promise<TargetRow> {
    const { minion_id: minionId } = row;
    const blocker = unresolved.find((r) => r.minion_id === minionId || r.minion_id === null);
    if (blocker !== undefined) return blockedRow(minionId, null, blocker);
    const check = await checkCapability(this.#d, minionId);
    switch (check.kind) {
      case 'ready':
        return { ...row, outcome: 'skipped' };
      case 'rejected':
        return rejectedRow(minionId, null, check.rejection, null);
      case 'unreachable':
        return notAskedRow(minionId, null, 'unreachable', check.failure);
      case 'no_target':
        return notAskedRow(minionId, null, 'no_target', null);
    }
  }
}

function isBlockingState(detail: unknown): detail is (typeof BLOCKING_STATES)[number] {
  return typeof detail === 'string' && (BLOCKING_STATES as readonly string[]).includes(detail);
}

/** The stages of a rollout, one per batch, in order. */
export function batchStages(d: ResolvedDeps, spec: RolloutSpec, settings: StageSettings): JobStage<RolloutFailureCode>[] {
  return spec.stageIds.map((id) => ({
    id,
    failureCodes: ROLLOUT_FAILURE_CODES,
    run: (ctx: StageContext<RolloutFailureCode>) => new BatchStage(d, spec, settings, ctx).run(),
  }));
}
