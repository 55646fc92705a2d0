import {
  MasterRunnerError,
  listRollouts,
  parseRolloutSpec,
  readRollout,
  startRollout,
  type Logger,
  type MasterDeps,
  type RolloutHandle,
  type RolloutInput,
  type RolloutListing,
  type RolloutOptions,
  type RolloutReport,
} from '@oduflow/master-runner';
import { setMaxListeners } from 'node:events';
import type { Registry } from 'prom-client';
import { ProblemError } from './problems.js';
import { rolloutIdOfKey } from './rollout-id.js';
import { createRolloutMetrics, type RolloutMetrics } from './rollout-metrics.js';
import { RolloutWorkspace, inputSha256, type Binding, type RolloutDir } from './rollout-workspace.js';
import { isTenantName } from './tokens.js';

/*
 * Rollouts asked for over HTTP, run in the background of the service
 * process on the master-runner library, with the service's store and its one
 * salt-api client.
 *
 * The Idempotency-Key binds by the rollout's id, derived from the key and its
 * scope (rollout-id.ts): the key's rollout is found again by name, with no
 * index to keep in step. Under the rollout's start lock, a POST finds either
 * a rollout that has its first checkpoint (same canonical input: the same
 * rollout, replayed; other input: key_mismatch) or none (it binds the input
 * and starts it). A second POST while the first holds the start lock is
 * key_in_flight. The binding lives as long as the rollout's directory: the
 * service never deletes it, so a key is kept at least as long as the 24 h
 * the API promises (and a key reused later still names its old rollout).
 *
 * Shutdown aborts every running rollout (RolloutOptions.signal): the
 * dispatches in flight finish and are recorded, nothing more is
 * checkpointed, and the run is left `interrupted` — what a crash at that
 * moment leaves, minus half-done calls. The next start resumes every rollout
 * its workspace holds `interrupted` (a crash leaves the same), which never
 * dispatches a target twice: a re-entered batch finds its requests by their
 * derived ids.
 */

export interface RolloutServiceOptions {
  /** The rollout workspace (absolute); the service's rollouts go under `http/`. */
  readonly workspace: string;
  readonly stageTimeoutMs?: number;
  readonly pollIntervalMs?: number;
  readonly concurrency?: number;
  /** After each durable checkpoint of a rollout (the crash tests' seam; never set by the shipped executable). */
  readonly onCheckpoint?: (kind: string, stageIndex: number | null) => void;
}

type RolloutCreation =
  | { readonly outcome: 'started' | 'replayed'; readonly report: RolloutReport }
  | { readonly outcome: 'key_mismatch' }
  | { readonly outcome: 'key_in_flight' };

interface RolloutListItem {
  readonly rollout_id: string;
  /** The rollout's latest run (a resume is a new run of the same rollout). */
  readonly run_id: string | null;
  /** The latest run's status (`interrupted`: its process is gone; the next start resumes it), or `unreadable`. */
  readonly status: RolloutReport['status'] | 'unreadable';
  readonly dry_run: boolean;
  readonly profile: Binding['profile'];
  readonly target_count: number;
  readonly batch_size: number;
  readonly max_unresolved: number;
  readonly created_at: string;
  readonly finished_at: string | null;
  readonly stages: number | null;
  readonly stages_succeeded: number | null;
  readonly stages_failed: number | null;
}

export interface RolloutService {
  /** False when this instance was started without a rollout workspace: the routes answer 503. */
  readonly enabled: boolean;
  /** Binds the key and starts the rollout, or finds the rollout the key already names. */
  create(who: { readonly tenant: string; readonly actor: string }, key: string, input: RolloutInput): Promise<RolloutCreation>;
  /** The latest report of a tenant's rollout; undefined when the tenant has no such rollout. */
  get(tenant: string, id: string): Promise<RolloutReport | undefined>;
  /** A page of the tenant's rollouts in rollout-id order (keyset: after that id). */
  list(tenant: string, page: { readonly after?: string; readonly limit: number }): Promise<{ readonly items: RolloutListItem[]; readonly more: boolean }>;
  /** Resumes every rollout of the workspace left interrupted; resolves when the scan is done (runs go on in the background). */
  resumeInterrupted(): Promise<void>;
  /** Stops accepting, aborts the running rollouts and waits until each has stopped. Idempotent. */
  stop(): Promise<void>;
}

const MAX_CHAIN = 10_000;

function refusedAs(error: unknown, detail: string): boolean {
  return MasterRunnerError.isInstance(error) && error.code === 'rollout_refused' && error.detail === detail;
}

/** The report of a rollout's latest run: the first run, then each resume that took it over. */
function headReport(workspace: string, id: string): RolloutReport | undefined {
  let report: RolloutReport;
  try {
    report = readRollout(workspace, id);
  } catch (error) {
    if (refusedAs(error, 'run_not_found')) return undefined; // bound, but never reached its first checkpoint
    throw error;
  }
  for (let hops = 0; report.superseded_by !== null && hops < MAX_CHAIN; hops += 1) {
    try {
      report = readRollout(workspace, report.superseded_by);
    } catch (error) {
      // A successor that never committed its header (a resume killed in its hand-over): this run is still the latest.
      if (refusedAs(error, 'run_not_found')) break;
      throw error;
    }
  }
  return report;
}

/** The listing of a rollout's latest run: the valid run nobody superseded (else the newest valid one). */
function headListing(workspace: string): RolloutListing | undefined {
  const listings = listRollouts(workspace);
  const valid = listings.filter((l): l is Extract<RolloutListing, { valid: true }> => l.valid);
  return valid.find((l) => l.superseded_by === null) ?? valid.at(-1) ?? listings.at(-1);
}

function errorCode(error: unknown): string {
  return MasterRunnerError.isInstance(error) ? error.code : error instanceof Error ? error.name : typeof error;
}

function inputOf(binding: Binding, targets: string[], stateDataJson: string | undefined): RolloutInput {
  return {
    profile: binding.profile,
    targets,
    batchSize: binding.batch_size,
    maxUnresolved: binding.max_unresolved,
    dryRun: binding.dry_run,
    ...(stateDataJson === undefined ? {} : { stateDataJson }),
  };
}

/** What an instance without a rollout workspace answers. */
export function disabledRolloutService(): RolloutService {
  const off = (): never => {
    throw new ProblemError('unavailable', 'this instance runs no rollouts; send rollouts to the instance that does', { retryAfterS: 60 });
  };
  const done = (): Promise<void> => Promise.resolve();
  return { enabled: false, create: off, get: off, list: off, resumeInterrupted: done, stop: done };
}

export function createRolloutService(deps: MasterDeps & { readonly logger: Logger }, options: RolloutServiceOptions, registry: Registry): RolloutService {
  const workspace = new RolloutWorkspace(options.workspace);
  const log = deps.logger.child({ component: 'rollouts' });
  const controller = new AbortController();
  // One signal for every rollout of the process: each one waiting between poll rounds listens to it (0: no warning at any count).
  setMaxListeners(0, controller.signal);
  const running = new Map<string, Promise<void>>();
  const metrics: RolloutMetrics = createRolloutMetrics(registry, () => running.size);
  let scan: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;

  const seam = options.onCheckpoint;
  const settings: Omit<RolloutOptions, 'workspace'> = {
    signal: controller.signal,
    ...(options.stageTimeoutMs === undefined ? {} : { stageTimeoutMs: options.stageTimeoutMs }),
    ...(options.pollIntervalMs === undefined ? {} : { pollIntervalMs: options.pollIntervalMs }),
    ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
    ...(seam === undefined ? {} : { onCheckpoint: (event) => seam(event.kind, event.stage?.index ?? null) }),
  };

  /** Follows a run to its end in the background: metrics, one log line, and the state data forgotten once nothing is left to publish. */
  function track(tenant: string, handle: RolloutHandle, origin: 'request' | 'resume'): void {
    metrics.started(origin);
    const fields = { rollout: handle.rolloutId, run_id: handle.runId, tenant };
    const settled = handle.done.then(
      (report) => {
        metrics.finished(report.status === 'succeeded' ? 'succeeded' : 'failed');
        log.info({ ...fields, status: report.status, halted: report.halted, counts: report.counts }, 'rollout finished');
        const dir = workspace.open(tenant, handle.rolloutId, false);
        try {
          dir?.forgetStateData();
        } finally {
          dir?.close();
        }
      },
      (error: unknown) => {
        if (MasterRunnerError.isInstance(error) && error.code === 'rollout_interrupted') {
          metrics.finished('interrupted');
          log.info(fields, 'rollout stopped by the shutdown at its last checkpoint; the next start resumes it');
        } else {
          metrics.finished('error');
          log.error({ ...fields, code: errorCode(error) }, 'rollout stopped: a checkpoint could not be written; it resumes at the next start');
        }
      },
    );
    const kept = settled.catch((error: unknown) => log.error({ ...fields, code: errorCode(error) }, 'a finished rollout could not be tidied'));
    running.set(handle.runId, kept);
    void kept.finally(() => running.delete(handle.runId));
  }

  async function startIn(dir: RolloutDir, tenant: string, input: RolloutInput, extra: Pick<RolloutOptions, 'rolloutId' | 'resume'>): Promise<RolloutHandle> {
    const handle = await startRollout(deps, input, { workspace: dir.jobWorkspace, ...settings, ...extra });
    track(tenant, handle, extra.resume === undefined ? 'request' : 'resume');
    return handle;
  }

  async function create(who: { readonly tenant: string; readonly actor: string }, key: string, input: RolloutInput): Promise<RolloutCreation> {
    try {
      const created = await createOrFind(who, key, input);
      metrics.admission(created.outcome);
      return created;
    } catch (error) {
      metrics.admission(MasterRunnerError.isInstance(error) ? error.code : 'error');
      throw error;
    }
  }

  async function createOrFind(who: { readonly tenant: string; readonly actor: string }, key: string, input: RolloutInput): Promise<RolloutCreation> {
    if (stopping !== undefined) throw new ProblemError('unavailable', 'the service is shutting down; retry against another instance or later', { retryAfterS: 5 });
    // Invalid input is refused before anything is written.
    const spec = parseRolloutSpec(input);
    const id = rolloutIdOfKey({ tenant: who.tenant, actor: who.actor, key });
    const fingerprint = inputSha256(spec);
    const dir = workspace.open(who.tenant, id, true) as RolloutDir;
    try {
      const lock = dir.tryStartLock();
      if (lock === undefined) return { outcome: 'key_in_flight' };
      try {
        const binding = dir.binding();
        const head = binding === undefined ? undefined : headReport(dir.jobWorkspace, id);
        if (binding !== undefined && head !== undefined) {
          return binding.input_sha256 === fingerprint ? { outcome: 'replayed', report: head } : { outcome: 'key_mismatch' };
        }
        const bound: Binding = {
          schema_version: 1,
          rollout_id: id,
          tenant: who.tenant,
          actor: who.actor,
          created_at: new Date().toISOString(),
          profile: spec.profile,
          state_digest: spec.stateDigest,
          batch_size: spec.batchSize,
          max_unresolved: spec.maxUnresolved,
          dry_run: spec.dryRun,
          target_count: spec.targets.length,
          input_sha256: fingerprint,
        };
        dir.bind(bound, spec.targets, spec.profile === 'custom' ? spec.stateDataJson : undefined);
        let handle: RolloutHandle;
        try {
          handle = await startIn(dir, who.tenant, inputOf(bound, [...spec.targets], spec.profile === 'custom' ? spec.stateDataJson : undefined), { rolloutId: id });
        } catch (error) {
          // Another process on this host (sharing the workspace) is starting or running it.
          if (refusedAs(error, 'job_locked')) return { outcome: 'key_in_flight' };
          throw error;
        }
        log.info(
          { rollout: id, run_id: handle.runId, tenant: who.tenant, actor: who.actor, profile: spec.profile, targets: spec.targets.length, dry_run: spec.dryRun },
          'rollout started',
        );
        return { outcome: 'started', report: readRollout(dir.jobWorkspace, handle.runId) };
      } finally {
        lock.release();
      }
    } finally {
      dir.close();
    }
  }

  // Reads are synchronous file reads (receipt-store); async for callers, like every other read of the service.
  function get(tenant: string, id: string): RolloutReport | undefined {
    const dir = workspace.open(tenant, id, false);
    if (dir === undefined) return undefined;
    try {
      const binding = dir.binding();
      if (binding?.tenant !== tenant) return undefined;
      return headReport(dir.jobWorkspace, id);
    } finally {
      dir.close();
    }
  }

  function item(dir: RolloutDir, binding: Binding): RolloutListItem | undefined {
    const head = headListing(dir.jobWorkspace);
    if (head === undefined) return undefined;
    const fields = {
      rollout_id: binding.rollout_id,
      run_id: head.run_id,
      dry_run: binding.dry_run,
      profile: binding.profile,
      target_count: binding.target_count,
      batch_size: binding.batch_size,
      max_unresolved: binding.max_unresolved,
      created_at: binding.created_at,
    };
    if (!head.valid) return { ...fields, status: 'unreadable', finished_at: null, stages: null, stages_succeeded: null, stages_failed: null };
    return { ...fields, status: head.status, finished_at: head.finished_at, stages: head.stages, stages_succeeded: head.stages_succeeded, stages_failed: head.stages_failed };
  }

  function list(tenant: string, page: { readonly after?: string; readonly limit: number }): { items: RolloutListItem[]; more: boolean } {
    const { after } = page;
    const ids = workspace.idsOf(tenant).filter((id) => after === undefined || id > after);
    const items: RolloutListItem[] = [];
    for (const id of ids) {
      if (items.length > page.limit) break;
      const dir = workspace.open(tenant, id, false);
      if (dir === undefined) continue;
      try {
        const binding = dir.binding();
        const found = binding?.tenant === tenant ? item(dir, binding) : undefined;
        if (found !== undefined) items.push(found);
      } finally {
        dir.close();
      }
    }
    return { items: items.slice(0, page.limit), more: items.length > page.limit };
  }

  /** One rollout found at start: resumed when interrupted; its state data forgotten when it ended. */
  async function resumeOne(tenant: string, id: string): Promise<void> {
    const dir = workspace.open(tenant, id, false);
    if (dir === undefined) return;
    const fields = { rollout: id, tenant };
    try {
      const binding = dir.binding();
      if (binding === undefined) return; // a start that never bound its input: nothing was answered 202
      const head = headListing(dir.jobWorkspace);
      if (head === undefined) return; // bound, but never reached its first checkpoint: a POST with its key starts it
      if (!head.valid) {
        log.error({ ...fields, run_id: head.run_id, code: head.code }, 'a rollout checkpoint is unreadable; it is not resumed');
        return;
      }
      if (head.status === 'succeeded' || head.status === 'failed') {
        dir.forgetStateData();
        return;
      }
      if (head.status !== 'interrupted') return; // running: another process on this host holds it
      const stateDataJson = dir.stateData();
      if (binding.profile === 'custom' && stateDataJson === undefined) {
        log.warn({ ...fields, run_id: head.run_id }, 'an interrupted custom rollout has no state data left; it is not resumed');
        return;
      }
      const lock = dir.tryStartLock();
      if (lock === undefined) return;
      try {
        const handle = await startIn(dir, tenant, inputOf(binding, dir.targets(), stateDataJson), { resume: head.run_id });
        log.info({ ...fields, run_id: handle.runId, resumed_from: head.run_id }, 'rollout resumed after a restart');
      } catch (error) {
        if (MasterRunnerError.isInstance(error) && error.code === 'rollout_interrupted') return; // the shutdown came first
        if (refusedAs(error, 'job_locked') || refusedAs(error, 'run_superseded')) return; // another process took it
        log.error({ ...fields, run_id: head.run_id, code: errorCode(error), detail: MasterRunnerError.isInstance(error) ? error.detail : undefined }, 'an interrupted rollout could not be resumed');
      } finally {
        lock.release();
      }
    } catch (error) {
      log.error({ ...fields, code: errorCode(error) }, 'a rollout could not be read at start');
    } finally {
      dir.close();
    }
  }

  async function resumeAll(): Promise<void> {
    let resumed = 0;
    try {
      for (const tenant of workspace.tenants().filter(isTenantName)) {
        for (const id of workspace.idsOf(tenant)) {
          if (controller.signal.aborted) return;
          const before = running.size;
          await resumeOne(tenant, id);
          if (running.size > before) resumed += 1;
        }
      }
    } catch (error) {
      log.error({ code: errorCode(error) }, 'the rollout workspace could not be scanned for interrupted rollouts');
    }
    if (resumed > 0) log.info({ rollouts: resumed }, 'interrupted rollouts resumed');
  }

  return {
    enabled: true,
    create,
    get: (tenant, id) => Promise.resolve(get(tenant, id)),
    list: (tenant, page) => Promise.resolve(list(tenant, page)),
    resumeInterrupted: () => (scan ??= resumeAll()),
    stop: () =>
      (stopping ??= (async () => {
        controller.abort();
        await scan;
        await Promise.all([...running.values()]);
      })()),
  };
}
