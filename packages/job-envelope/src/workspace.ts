import { closeSync, constants, fstatSync, fsyncSync, openSync } from 'node:fs';
import { type FileLock, type PrivateDir, ReceiptStoreError, openPrivateDir } from '@oduflow/receipt-store';
import { JobEnvelopeError, fromStoreError, store } from './errors.js';
import { type Ledger, type StageRecord, type Superseded, SupersededSchema, stageFileIndex, stageFileName, stageRecordText, validateLedger } from './ledger.js';
import type { JobReport } from './report.js';
import { schemaFailure } from './schema-failure.js';

/*
 * The workspace on disk, every directory 0700 and owned by us, every file
 * 0600 with one link, opened without following symlinks (receipt-store):
 *
 *   <workspace>/locks/<job_type>.lock   kernel flock: one runner per job type; never deleted
 *   <workspace>/runs/<run_id>/          one directory per run (a resume is a new run)
 *     run.lock                          held by the living runner: tells running from interrupted
 *     job.json                          the run header (written first with no-replace, then replaced)
 *     stage-NNNNN.json                  one per reached stage: ledger entry + the stage's saved state
 *     report.json                       the sanitized report, once the run finished
 *     superseded.json                   written once, when a resume takes this run over
 *     scratch/                          a stage's private scratch directory, if it asked for one
 */

export const HEADER_FILE = 'job.json';
export const REPORT_FILE = 'report.json';
const SUPERSEDED_FILE = 'superseded.json';
const RUN_LOCK_FILE = 'run.lock';
const SCRATCH_DIR = 'scratch';
const KNOWN_ENTRIES = new Set([HEADER_FILE, REPORT_FILE, SUPERSEDED_FILE, RUN_LOCK_FILE, SCRATCH_DIR]);

/** How long a runner waits for its own run lock (a reader may be probing it for a moment). */
const RUN_LOCK_WAIT_MS = 2_000;

export interface Workspace {
  readonly root: PrivateDir;
  readonly runs: PrivateDir;
  close(): void;
}

function closeAll(...dirs: (PrivateDir | undefined)[]): void {
  for (const dir of dirs) dir?.close();
}

/**
 * Opens the workspace. `create` (a new run) makes what is missing; otherwise
 * (a resume, a reader) everything must exist and nothing is swept or written.
 */
export function openWorkspace(path: string, create: boolean): Workspace {
  const root = store(`the workspace ${path}`, () => openPrivateDir(path, { create, removeStaleTemps: create }));
  try {
    const runs = store(`the runs of ${path}`, () => root.subdir('runs', { create, removeStaleTemps: false }));
    return { root, runs, close: () => closeAll(runs, root) };
  } catch (error) {
    root.close();
    throw error;
  }
}

/**
 * Takes this workspace's lock for `jobType` without waiting. A stable file
 * per job type, never deleted: the kernel drops the flock when its holder
 * dies, so there is no stale lock to guess about and no PID to trust.
 */
export function takeJobLock(workspace: Workspace, jobType: string): FileLock {
  const name = `${jobType}.lock`;
  return store(`the ${jobType} lock`, () => {
    const locks = workspace.root.subdir('locks', { create: true, removeStaleTemps: false });
    try {
      const lock = locks.tryLockSync(name);
      if (lock === undefined) {
        throw new JobEnvelopeError('job_locked', `another process is running a ${jobType} job in this workspace`);
      }
      return lock;
    } finally {
      locks.close();
    }
  });
}

/** Opens an existing run directory for reading: nothing is created or swept. */
export function openRunDir(workspace: Workspace, runId: string): PrivateDir {
  return store(`run ${runId}`, () => workspace.runs.subdir(runId, { removeStaleTemps: false }));
}

/** A run as found on disk, proven consistent. */
export interface LoadedRun {
  readonly ledger: Ledger;
  readonly superseded: Superseded | null;
  readonly hasReport: boolean;
}

/** The names in a run directory, sorted into what they are; anything unexpected is `corrupt_checkpoint`. */
function classifyEntries(dir: PrivateDir, runId: string): { stageIndices: number[]; names: Set<string> } {
  const names = new Set(store(`run ${runId}`, () => dir.list()));
  if (!names.has(HEADER_FILE)) throw new JobEnvelopeError('run_not_found', `run ${runId} has no committed checkpoint`);
  const stageIndices: number[] = [];
  for (const name of names) {
    const index = stageFileIndex(name);
    if (index !== undefined) stageIndices.push(index);
    else if (!KNOWN_ENTRIES.has(name)) throw new JobEnvelopeError('corrupt_checkpoint', `run ${runId} holds an entry the envelope never writes`);
  }
  return { stageIndices, names };
}

function readMarker(dir: PrivateDir, runId: string): Superseded {
  const parsed = SupersededSchema.safeParse(store(`run ${runId}`, () => dir.readJson(SUPERSEDED_FILE)));
  if (!parsed.success) throw schemaFailure('corrupt_checkpoint', `the superseded marker of run ${runId}`, parsed.error);
  if (parsed.data.run_id !== runId) throw new JobEnvelopeError('corrupt_checkpoint', `the superseded marker of run ${runId} names another run`);
  return parsed.data;
}

/**
 * Reads a run and proves it consistent (validateLedger) without writing
 * anything: the directory is opened without the stale-temp sweep.
 */
export function loadRun(dir: PrivateDir, runId: string): LoadedRun {
  const { stageIndices, names } = classifyEntries(dir, runId);
  const header = store(`run ${runId}`, () => dir.readJson(HEADER_FILE));
  const stageFiles = new Map<number, unknown>();
  for (const index of stageIndices) stageFiles.set(index, store(`run ${runId}`, () => dir.readJson(stageFileName(index))));
  const ledger = validateLedger(header, runId, stageFiles);
  const superseded = names.has(SUPERSEDED_FILE) ? readMarker(dir, runId) : null;
  return { ledger, superseded, hasReport: names.has(REPORT_FILE) };
}

/** True when the run's runner is alive (it holds run.lock); probed with a shared lock, released at once. */
export function isRunLive(dir: PrivateDir, runId: string): boolean {
  const probe = store(`run ${runId}`, () => dir.tryLockSync(RUN_LOCK_FILE, { shared: true }));
  if (probe === undefined) return true;
  probe.release();
  return false;
}

/**
 * fsyncs a directory we just made, by path. receipt-store's PrivateDir does
 * not expose its descriptor; this second open (O_NOFOLLOW, owner and mode
 * checked) only ever fsyncs, so a path swapped in between could at worst make
 * us fsync another private directory of ours, never write anywhere.
 */
function fsyncDirectoryPath(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    throw new JobEnvelopeError('io_error', `cannot open ${path} to fsync it`, { cause: error });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isDirectory() || st.uid !== process.geteuid?.() || (st.mode & 0o7777) !== 0o700) {
      throw new JobEnvelopeError('unsafe_workspace', `${path} changed under the runner`);
    }
    fsyncSync(fd);
  } catch (error) {
    if (JobEnvelopeError.isInstance(error)) throw error;
    throw new JobEnvelopeError('io_error', `cannot fsync ${path}`, { cause: error });
  } finally {
    closeSync(fd);
  }
}

/** A run directory this process writes, with its run lock held. */
export interface OwnedRun {
  readonly dir: PrivateDir;
  readonly lock: FileLock;
  release(): void;
}

/**
 * Makes (or, to finish an interrupted hand-over, reopens) the run directory,
 * fsyncs it (its parent was fsynced by receipt-store when it was made) and
 * takes its run lock — all before the first file is written into it.
 */
export async function allocateRun(workspace: Workspace, runId: string): Promise<OwnedRun> {
  const dir = store(`run ${runId}`, () => workspace.runs.subdir(runId, { create: true }));
  try {
    fsyncDirectoryPath(dir.path);
    const lock = await dir.lock(RUN_LOCK_FILE, { wait: RUN_LOCK_WAIT_MS }).catch((error: unknown) => {
      throw ReceiptStoreError.isInstance(error)
        ? new JobEnvelopeError('job_locked', `run ${runId} is held by another process`, { cause: error })
        : error;
    });
    return {
      dir,
      lock,
      release: () => {
        lock.release();
        dir.close();
      },
    };
  } catch (error) {
    dir.close();
    throw error;
  }
}

/**
 * Checks that a half-made hand-over directory holds only what a resume
 * writes before its header (the run lock and stage copies), so finishing the
 * hand-over overwrites our own files and nothing else.
 */
export function checkHandOverLeftovers(dir: PrivateDir, runId: string): void {
  for (const name of store(`run ${runId}`, () => dir.list())) {
    if (name !== RUN_LOCK_FILE && stageFileIndex(name) === undefined) {
      throw new JobEnvelopeError('corrupt_checkpoint', `run ${runId} was being created by a resume but holds other entries`);
    }
  }
}

/** Replaces a stage file; `stateText` (canonical, from canonicalStateText), when given, is written as its state instead of `record.state`. */
export function writeStageRecord(dir: PrivateDir, record: StageRecord, stateText?: string | null): void {
  store(`stage ${record.index} of run ${record.run_id}`, () => dir.writeJsonTextAtomic(stageFileName(record.index), stageRecordText(record, stateText), { replace: true }));
}

/** The first header of a run is written without replace: two runners can never both create one run. */
export function writeRunHeader(dir: PrivateDir, header: object, runId: string, first: boolean): void {
  store(`the header of run ${runId}`, () => dir.writeJsonAtomic(HEADER_FILE, header, { replace: !first }));
}

export function writeReport(dir: PrivateDir, report: JobReport): void {
  store(`the report of run ${report.run_id}`, () => dir.writeJsonAtomic(REPORT_FILE, report, { replace: true }));
}

/**
 * Marks `source` as taken over by `successor` (no-replace). Finding the same
 * marker already there is an interrupted hand-over being finished.
 */
export function writeSuperseded(dir: PrivateDir, marker: Superseded): void {
  try {
    dir.writeJsonAtomic(SUPERSEDED_FILE, marker);
  } catch (error) {
    if (ReceiptStoreError.isInstance(error) && error.code === 'already_exists') {
      const found = readMarker(dir, marker.run_id);
      if (found.successor === marker.successor) return;
      throw new JobEnvelopeError('run_superseded', `run ${marker.run_id} was already resumed by run ${found.successor}`);
    }
    throw fromStoreError(error, `the superseded marker of run ${marker.run_id}`);
  }
}

/** The stage's private scratch directory inside its run (not copied by a resume). */
export function openScratch(dir: PrivateDir, runId: string): PrivateDir {
  return store(`the scratch directory of run ${runId}`, () => dir.subdir(SCRATCH_DIR, { create: true }));
}

/** True when the directory of `runId` exists and holds a committed header. */
export function runHasHeader(workspace: Workspace, runId: string): boolean {
  let dir: PrivateDir;
  try {
    dir = workspace.runs.subdir(runId, { removeStaleTemps: false });
  } catch (error) {
    if (ReceiptStoreError.isInstance(error) && error.code === 'not_found') return false;
    throw fromStoreError(error, `run ${runId}`);
  }
  try {
    return store(`run ${runId}`, () => dir.list()).includes(HEADER_FILE);
  } finally {
    dir.close();
  }
}
