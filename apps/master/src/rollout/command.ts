import { dirname, isAbsolute, join, resolve } from 'node:path';
import {
  DEFAULT_FILE_STORE_ROOT,
  MasterRunnerError,
  listRollouts,
  readRollout,
  runRollout,
  type MasterDeps,
  type RecordStore,
  type RolloutInput,
  type RolloutOptions,
} from '@oduflow/master-runner';
import { isRequestId } from '@oduflow/protocol';
import type { Command } from 'commander';
import type { CommandResult } from '../commands.js';
import type { CommonFlags } from '../config.js';
import { EXIT, exitForRollout } from '../exit-codes.js';
import { readStateDataFile } from '../state-data-file.js';
import { withExistingStore, withMaster, withSalt, type Env, type Wiring } from '../wiring.js';
import { progressMode, progressSink, type ProgressSink } from './progress.js';
import { readTargets } from './targets-file.js';
import { listingView, rolloutView } from './view.js';

/*
 * `oduflow-master rollout`: start, resume, show and list rollouts. A thin
 * layer over @oduflow/master-runner's rollout library: flags, wiring,
 * progress on stderr, the report on stdout. The workspace (the job
 * checkpoints) defaults to `rollouts/` beside a file store's directory.
 */

interface RolloutFlags extends CommonFlags {
  readonly profile?: string;
  readonly targets?: string;
  readonly batch?: string;
  readonly maxUnresolved?: string;
  readonly dryRun?: boolean;
  readonly resume?: string;
  readonly workspace?: string;
  readonly stateDataFile?: string;
  readonly stageTimeout?: string;
  readonly pollInterval?: string;
  readonly concurrency?: string;
}

/** Where rollouts live when nothing says: beside the default file store. */
const DEFAULT_ROLLOUT_WORKSPACE = join(dirname(DEFAULT_FILE_STORE_ROOT), 'rollouts');

function pick(flag: string | undefined, env: Env, name: string): string | undefined {
  const value = flag ?? env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** --workspace, else ODUFLOW_ROLLOUT_WORKSPACE, else `rollouts/` beside a file store's directory. */
export function rolloutWorkspace(flags: RolloutFlags, env: Env): string {
  const chosen = pick(flags.workspace, env, 'ODUFLOW_ROLLOUT_WORKSPACE');
  if (chosen !== undefined) {
    if (!isAbsolute(chosen)) throw new MasterRunnerError('invalid_input', 'the rollout workspace must be an absolute path', { detail: 'invalid_rollout_option' });
    return chosen;
  }
  const store = pick(flags.store, env, 'ODUFLOW_STORE');
  // A store given as a URL (PostgreSQL) has no directory to sit beside.
  return store !== undefined && isAbsolute(store) ? join(dirname(resolve(store)), 'rollouts') : DEFAULT_ROLLOUT_WORKSPACE;
}

function count(value: string | undefined, what: string, detail: 'invalid_batch_size' | 'invalid_budget' | 'invalid_rollout_option'): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n)) throw new MasterRunnerError('invalid_input', `${what} must be a whole number`, { detail });
  return n;
}

function usage(message: string): never {
  throw new MasterRunnerError('invalid_input', message, { detail: 'invalid_rollout_option' });
}

/** A store that holds nothing: a dry run against a store that does not exist yet (nothing blocks, nothing is created). */
function emptyStore(location: string): RecordStore {
  const refuse = (): never => {
    throw new MasterRunnerError('internal', 'a dry run must not write to the record store');
  };
  return {
    location,
    get: () => Promise.resolve(undefined),
    getByJid: () => Promise.resolve(undefined),
    list: () => Promise.resolve([]),
    countUnresolved: () => Promise.resolve({}),
    history: () => Promise.resolve(undefined),
    scan: () => ({ [Symbol.asyncIterator]: () => ({ next: () => Promise.resolve({ done: true as const, value: undefined }) }) }),
    blockersOf: () => Promise.resolve([]),
    withTarget: refuse,
    updateRequest: refuse,
    claimKey: refuse,
    releaseKey: refuse,
    expireKeys: refuse,
    claimOutbox: refuse,
    removeOutbox: refuse,
    deferOutbox: refuse,
    close: () => Promise.resolve(),
  };
}

/** Dry runs read: an existing store as it is (never created), and salt-api for capability calls only. */
async function withDryRunDeps<T>(w: Wiring, work: (deps: MasterDeps) => Promise<T>): Promise<T> {
  return withSalt(w, (salt, callTimeoutMs) => {
    const deps = (store: RecordStore): MasterDeps => ({ store, salt, logger: w.logger, callTimeoutMs });
    const location = pick(w.flags.store, w.env, 'ODUFLOW_STORE') ?? DEFAULT_FILE_STORE_ROOT;
    return withExistingStore<Promise<T> | T>(w, (store) => work(deps(store)), () => work(deps(emptyStore(location))));
  });
}

interface RolloutTerminal {
  readonly stderrIsTty: boolean;
  readonly stderr: NodeJS.WritableStream;
  readonly stdin: AsyncIterable<Buffer | string>;
}

/** This process's terminal, looked at only when a rollout starts (touching process.stdin opens it). */
function processTerminal(): RolloutTerminal {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-boolean-literal-compare -- @types/node says boolean, but isTTY is undefined when stderr is not a terminal
  return { stderrIsTty: process.stderr.isTTY === true, stderr: process.stderr, stdin: process.stdin };
}

async function startOrResume(w: Wiring, flags: RolloutFlags, write: (text: string) => void, terminal: RolloutTerminal): Promise<CommandResult> {
  if (flags.profile === undefined) usage('rollout needs --profile');
  if (flags.targets === undefined) usage('rollout needs --targets <file|->');
  if (flags.resume !== undefined && !isRequestId(flags.resume)) {
    throw new MasterRunnerError('invalid_input', 'a rollout run id is a canonical UUID', { detail: 'invalid_request_id' });
  }
  const workspace = rolloutWorkspace(flags, w.env);
  const batchSize = count(flags.batch, '--batch', 'invalid_batch_size');
  const maxUnresolved = count(flags.maxUnresolved, '--max-unresolved', 'invalid_budget');
  const stageTimeoutMs = count(flags.stageTimeout, '--stage-timeout', 'invalid_rollout_option');
  const pollIntervalMs = count(flags.pollInterval, '--poll-interval', 'invalid_rollout_option');
  const concurrency = count(flags.concurrency, '--concurrency', 'invalid_rollout_option');
  const stateDataJson = flags.stateDataFile === undefined ? undefined : readStateDataFile(flags.stateDataFile);
  const input: RolloutInput = {
    profile: flags.profile,
    targets: await readTargets(flags.targets, terminal.stdin),
    dryRun: flags.dryRun === true,
    ...(batchSize === undefined ? {} : { batchSize }),
    ...(maxUnresolved === undefined ? {} : { maxUnresolved }),
    ...(stateDataJson === undefined ? {} : { stateDataJson }),
  };
  const mode = progressMode(flags.json === true, terminal.stderrIsTty);
  const sink: ProgressSink = progressSink(mode, write, terminal.stderr);
  // Under the live bar, info lines (one per request recorded) would tear it: warnings only, unless a level was asked for.
  if (mode === 'bar' && pick(flags.logLevel, w.env, 'ODUFLOW_LOG_LEVEL') === undefined) w = { ...w, logger: w.logger.child({}, { level: 'warn' }) };
  const seam = w.seams.rolloutCheckpoint;
  const options: RolloutOptions = {
    workspace,
    onProgress: sink.onProgress,
    ...(flags.resume === undefined ? {} : { resume: flags.resume }),
    ...(stageTimeoutMs === undefined ? {} : { stageTimeoutMs }),
    ...(pollIntervalMs === undefined ? {} : { pollIntervalMs }),
    ...(concurrency === undefined ? {} : { concurrency }),
    ...(seam === undefined ? {} : { onCheckpoint: (event) => seam(event.kind, event.stage?.index ?? null) }),
  };
  try {
    const report = await (input.dryRun === true ? withDryRunDeps(w, (deps) => runRollout(deps, input, options)) : withMaster(w, (deps) => runRollout(deps, input, options)));
    return { report: rolloutView(report), exitCode: exitForRollout(report) };
  } finally {
    sink.stop();
  }
}

/**
 * `rollout [--profile … --targets …]`, `rollout show <run-id>`, `rollout list`.
 * Read-only for show and list: no store is opened, no lock is taken for
 * writing, nothing is created.
 */
async function rolloutCommand(
  w: Wiring,
  flags: RolloutFlags,
  operands: readonly (string | undefined)[],
  write: (text: string) => void,
  terminal: () => RolloutTerminal = processTerminal,
): Promise<CommandResult> {
  const [action, runId] = operands;
  if (action === undefined) return startOrResume(w, flags, write, terminal());
  const startFlags = ['profile', 'targets', 'batch', 'maxUnresolved', 'dryRun', 'resume', 'stateDataFile', 'stageTimeout', 'pollInterval', 'concurrency'] as const;
  if (startFlags.some((flag) => flags[flag] !== undefined)) usage(`rollout ${action} takes only --workspace and the common options`);
  const workspace = rolloutWorkspace(flags, w.env);
  if (action === 'show') {
    if (runId === undefined || !isRequestId(runId)) throw new MasterRunnerError('invalid_input', 'rollout show needs a run id (a canonical UUID)', { detail: 'invalid_request_id' });
    return { report: rolloutView(readRollout(workspace, runId)), exitCode: EXIT.ok };
  }
  if (action === 'list') {
    if (runId !== undefined) usage('rollout list takes no run id');
    return { report: listingView(listRollouts(workspace)), exitCode: EXIT.ok };
  }
  return usage('rollout takes show <run-id>, list, or --profile and --targets to start a rollout');
}

type Work<F extends object> = (w: Wiring, flags: F & CommonFlags, operands: readonly string[]) => Promise<CommandResult>;

/** What main.ts lends the command: its common options, its runner of commands, and stderr. */
export interface CommandKit {
  readonly withCommonOptions: (command: Command) => Command;
  readonly run: <F extends object>(work: Work<F>) => (this: Command) => Promise<void>;
  readonly io: { readonly stderr: (text: string) => void };
}

export function registerRolloutCommand(program: Command, kit: CommandKit): void {
  kit
    .withCommonOptions(program.command('rollout'))
    .description('apply a profile to many minions, batch by batch, as a checkpointed job that resumes after a crash (also: rollout show <run-id>, rollout list)')
    .argument('[action]', 'show | list; omit it to start (or --resume) a rollout')
    .argument('[run-id]', 'with show: the rollout run to show')
    .option('--profile <profile>', 'configure | production | volume_resize | credentials | custom')
    .option('--targets <file|->', 'minion ids, one per line (# comments), from a file or - for standard input')
    .option('--batch <n>', 'targets per stage (default 10)')
    .option('--max-unresolved <n>', 'halt after a batch once failed + unresolved targets exceed this (default 0)')
    .option('--dry-run', 'dispatch nothing: check blockers and capabilities only')
    .option('--resume <run-id>', 'resume an interrupted or halted rollout (the same targets, profile, batch, budget and mode)')
    .option('--workspace <dir>', 'rollout checkpoints (env ODUFLOW_ROLLOUT_WORKSPACE; default rollouts/ beside the store directory)')
    .option('--state-data-file <file>', 'canonical JSON high data (custom profile only; never stored: give it again to resume)')
    .option('--stage-timeout <ms>', 'how long a batch is polled before what is open is called unresolved (default 900000)')
    .option('--poll-interval <ms>', 'pause between poll rounds of a batch (default 2000)')
    .option('--concurrency <n>', 'dispatches and polls in flight at once (default 8)')
    .action(kit.run<RolloutFlags>((w, flags, operands) => rolloutCommand(w, flags, operands, kit.io.stderr)));
}
