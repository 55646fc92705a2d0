import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { modulePath, readAsset, sha256Hex, verifyInstalledModule, writeSaltFileTree } from '@oduflow/minion-wrapper';
import { createTopologyApi, type ClientReceiptsResults, type LowState } from './topology-api.js';
import {
  installMinionBundle,
  seedKeys,
  writeApiCredentials,
  writeMasterConfig,
  writeMinionConfig,
  writeRole,
  type TopologyPorts,
} from './topology-config.js';
import { createSupervisor, freePorts, newDaemon, startWatchdog, tcpOpen, type Daemon, type SaltCliResult } from './topology-daemons.js';
import { repoRoot, masterPaths, minionPaths, prepareTopologyDir, type MinionPaths } from './topology-paths.js';
import { readJobWorkers, processesUnder, signal, waitFor, type JobWorker, type ProcInfo } from './topology-process.js';
import { DEFAULT_SLOW_STATE_SECONDS, defaultTestRoles } from './topology-roles.js';

export {
  CLIENT_CREDENTIALS_SLS,
  CLIENT_PRODUCTION_SLS,
  CLIENT_STACK_SLS,
  DEFAULT_SLOW_STATE_SECONDS,
  RENDER_ERROR_SLS,
  ROLE_MARKERS,
  clientStorageResizeSls,
  defaultTestRoles,
} from './topology-roles.js';
export { processesUnder, type JobWorker, type ProcInfo } from './topology-process.js';
export type { ClientReceiptsResults, LowState } from './topology-api.js';
export type { SaltCliResult } from './topology-daemons.js';

export interface TopologyOptions {
  /** Number of minions (default 1). */
  minions?: number;
  /** Fixed minion ids (canonical `client-<uuid>`); default random v4 ids. Its length wins over `minions`. */
  minionIds?: string[];
  /** Topology directory (must be empty or absent; kept after stop). Default: a fresh mkdtemp, removed on stop. */
  dir?: string;
  /** Python venv with salt==3006.27 + CherryPy (default `<repo>/.venv`, or $ODUFLOW_VENV). */
  venv?: string;
  /** Install the module the production way before the minions start (default true). */
  installModule?: boolean;
  /** Module file to install and serve (default: the reviewed minion-wrapper modulePath()). */
  moduleSource?: string;
  /** Extra or replacement files in the master's file_roots: relative path → content (e.g. `roles/client_stack.sls`). */
  roles?: Record<string, string>;
  /** Duration of the slow state in roles/client_storage_resize.sls (default 8 s). */
  slowStateSeconds?: number;
  /** Salt log level written to the daemons' log files (default "info"). */
  logLevel?: string;
  /** Keep the directory after stop() even when it was created by mkdtemp. */
  keepDir?: boolean;
  /** Deadline for the whole start-up (default 60 s). */
  startTimeoutMs?: number;
  /**
   * Extra minion options, for every minion or per minion id: written as the
   * include `minion.d/zz-topology.conf`, which Salt reads after the
   * cloud-init include (`minion.d/oduflow.conf`), so these win. Salt merges
   * includes key by key: a mapping merges recursively, a list is extended,
   * and a `schedule` entry of the same name is replaced whole (for example
   * `{ schedule: { oduflow_client_receipts: clientReceiptsScheduleEntry(5, 2) } }`
   * for a test-only interval). A readiness option set here (`multiprocessing`,
   * `cache_jobs`, `sudo_user`, ...) overrides the fragment's.
   */
  minionOptions?: Record<string, unknown> | ((minionId: string) => Record<string, unknown>);
}

export interface Topology {
  dir: string;
  /** `http://127.0.0.1:<port>` (rest_cherrypy, no TLS). */
  saltApiUrl: string;
  username: string;
  /** File holding only the salt-api password (mode 0600). */
  passwordFile: string;
  /** `file` (a text file of user:sha256(password) read by the master). */
  eauth: string;
  minionIds: string[];
  /** Ports chosen at start. */
  ports: { publish: number; ret: number; api: number };
  /** The module SHA-256 the minions were installed with (null when installModule is false). */
  moduleSha256: string | null;
  /** The master's file_roots directory (file-tree output + roles). */
  fileRoot: string;
  masterConfigDir: string;
  minionConfigDir(minionId: string): string;
  /** The minion's Salt extension-module directory (`.../extmods`). */
  extmodsDir(minionId: string): string;
  /** The minion's Salt cachedir (job proc files live in `<cachedir>/proc`). */
  cacheDir(minionId: string): string;
  /** The minion's `oduflow_receipt_dir`. */
  receiptDir(minionId: string): string;
  /** Side-effect counter: one line per test-role execution. */
  markerFile(minionId: string): string;
  /** Lines of the marker file (empty when absent). */
  markerLines(minionId: string): string[];
  /** `name`: master, api or a minion id. */
  logFile(name: string): string;

  stopMaster(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the master and waits until salt-api logs in and every running minion answers test.ping. */
  startMaster(): Promise<void>;
  stopSaltApi(signal?: NodeJS.Signals): Promise<void>;
  startSaltApi(): Promise<void>;
  stopMinion(minionId: string, signal?: NodeJS.Signals): Promise<void>;
  /** Starts the minion and waits until it answers test.ping. */
  startMinion(minionId: string): Promise<void>;
  /** Main pid of a running daemon (its process group id), or null. */
  daemonPid(name: string): number | null;
  /**
   * Running Salt jobs of the minion, from `<cachedir>/proc/<jid>` (written by
   * the minion with the worker's pid), keeping only live workers of this
   * minion. In 3006.27 a worker stays in the minion's process group: a
   * SIGKILL of the minion (`stopMinion(id, 'SIGKILL')`) kills it too.
   */
  jobWorkers(minionId: string): Promise<JobWorker[]>;
  /** Pids of {@link Topology.jobWorkers}. */
  jobWorkerPids(minionId: string): Promise<number[]>;
  /** Processes of this topology that are still alive (teardown expects none). */
  leftoverProcesses(): ProcInfo[];

  /** Runs a master-side Salt CLI (`salt`, `salt-key`, `salt-run`, ...) with `-c <master config>`. */
  runSaltCli(argv: string[], options?: { timeoutMs?: number }): Promise<SaltCliResult>;
  /** Runs `salt-call -c <minion config> ...args` (add `--local` to skip the master). */
  saltCall(minionId: string, args: string[], options?: { timeoutMs?: number }): Promise<SaltCliResult>;
  /** salt-api login (eauth `file`) → token; cached and refreshed on 401 by `saltApi`. */
  login(): Promise<string>;
  /** POST / to salt-api with the topology's token; returns the parsed `return` array. */
  saltApi(lowstate: LowState | LowState[], options?: { timeoutMs?: number }): Promise<unknown[]>;
  /** test.ping on exactly these minions through salt-api (`local`, `tgt_type: list`). */
  ping(minionIds?: string[]): Promise<Record<string, unknown>>;
  /** state.apply client_receipts on the minions; throws unless every state succeeded. Returns per-minion state results. */
  applyClientReceipts(minionIds?: string[]): Promise<ClientReceiptsResults>;
  /** Replaces (or adds) a file in the master's file_roots; takes effect for the next state run. */
  setRole(relativePath: string, content: string): void;

  /** Tears everything down by pid, verifies nothing is left, removes a mkdtemp dir. Idempotent. */
  stop(): Promise<void>;
}

const SALT_BINARIES = ['salt-master', 'salt-minion', 'salt-api', 'salt'];

function resolveVenv(requested: string | undefined): string {
  const venv = resolve(requested ?? process.env.ODUFLOW_VENV ?? join(repoRoot(), '.venv'));
  for (const bin of SALT_BINARIES) {
    if (!existsSync(join(venv, 'bin', bin))) {
      throw new Error(`topology: ${join(venv, 'bin', bin)} is missing; run scripts/ensure-python.sh`);
    }
  }
  return venv;
}

function readLines(path: string): string[] {
  try {
    return readFileSync(path, 'utf8').split('\n').filter((line) => line !== '');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** The file of the cloud-init install whose changes say whether client_receipts touched the module. */
const INSTALLED_MODULE_STATE = 'file_|-oduflow_job_module_|-';

/**
 * Starts a real salt-master, salt-api and minions on 127.0.0.1 in a private
 * directory, each minion bootstrapped with the production cloud-init
 * fragment, and (by default) checks that client_receipts leaves the module
 * it installed untouched.
 */
export async function startTopology(options: TopologyOptions = {}): Promise<Topology> {
  const startedAt = Date.now();
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const deadlineLeft = () => Math.max(5_000, startTimeoutMs - (Date.now() - startedAt));
  const venv = resolveVenv(options.venv);
  const minionIds = options.minionIds ?? Array.from({ length: options.minions ?? 1 }, () => `client-${randomUUID()}`);
  if (minionIds.length < 1) throw new Error('topology: at least one minion');
  const { dir, ownDir } = prepareTopologyDir(options.dir);
  const removeDir = ownDir && !options.keepDir;

  const user = userInfo().username;
  const logLevel = options.logLevel ?? 'info';
  const [publish, ret, api] = (await freePorts(3)) as [number, number, number];
  const ports: TopologyPorts = { publish, ret, api };
  const master = masterPaths(dir);
  const credentials = writeApiCredentials(master);

  // The master's file tree: exactly what `oduflow-minion file-tree` writes, plus test roles.
  mkdirSync(master.fileRoot, { recursive: true, mode: 0o755 });
  mkdirSync(master.pillarRoot, { recursive: true, mode: 0o755 });
  const moduleSource = options.moduleSource ?? modulePath();
  const tree = writeSaltFileTree(master.fileRoot, { moduleSource });
  const roles = { ...defaultTestRoles(options.slowStateSeconds ?? DEFAULT_SLOW_STATE_SECONDS), ...(options.roles ?? {}) };
  const setRole = (relativePath: string, content: string) => writeRole(master.fileRoot, relativePath, content);
  for (const [path, content] of Object.entries(roles)) setRole(path, content);

  // Salt re-roots every log path under the daemon's root_dir, so logs live there;
  // console output of each daemon goes to <dir>/logs/<name>.out.
  mkdirSync(master.logsDir, { mode: 0o700 });
  writeMasterConfig(master, { ports, user, logLevel, username: credentials.username });

  // Minions: short per-index roots (socket path limit); production install of the module.
  const minions = new Map<string, MinionPaths>();
  const module = readAsset(moduleSource, 'module source');
  const install = options.installModule ?? true;
  let moduleSha256: string | null = null;
  for (const [index, id] of minionIds.entries()) {
    const paths = minionPaths(dir, index);
    minions.set(id, paths);
    const extra = typeof options.minionOptions === 'function' ? options.minionOptions(id) : options.minionOptions;
    writeMinionConfig(paths, { ports, user, logLevel }, extra);
    moduleSha256 = installMinionBundle(paths, id, module, install);
  }
  if (moduleSha256 !== null && moduleSha256 !== tree.moduleSha256) throw new Error('topology: file tree and install differ');

  const minion = (id: string): MinionPaths => {
    const paths = minions.get(id);
    if (paths === undefined) throw new Error(`topology: unknown minion ${JSON.stringify(id)}`);
    return paths;
  };
  seedKeys(master.pkiDir, 'master');
  for (const id of minionIds) seedKeys(minion(id).pkiDir, 'minion');

  const daemons = new Map<string, Daemon>([
    ['master', newDaemon('master', 'salt-master', master.configDir, master.masterPidfile)],
    ['api', newDaemon('api', 'salt-api', master.configDir, master.apiPidfile)],
    ...minionIds.map((id): [string, Daemon] => [id, newDaemon(id, 'salt-minion', minion(id).configDir, minion(id).pidfile)]),
  ]);
  const daemon = (name: string): Daemon => {
    const d = daemons.get(name);
    if (d === undefined) throw new Error(`topology: unknown daemon ${JSON.stringify(name)}`);
    return d;
  };
  const supervisor = createSupervisor({ venv, dir, logsDir: master.logsDir });
  const saltApiUrl = `http://127.0.0.1:${api}`;
  const client = createTopologyApi({ url: saltApiUrl, ...credentials });

  const startMasterOnly = async (timeoutMs: number) => {
    supervisor.launch(daemon('master'));
    await waitFor('salt-master to listen', timeoutMs, async () => ((await tcpOpen(ret)) ? true : undefined), 50);
    await waitFor('salt-master workers', timeoutMs, () => (existsSync(master.workersIpc) ? true : undefined), 50);
  };
  const runningMinions = () => minionIds.filter((id) => daemon(id).pid !== null);

  // A watchdog outlives this Node process: if it dies without stop() (a
  // killed test worker), every process of the topology is killed by pid.
  const watchdog = startWatchdog(venv, dir, removeDir);
  const leftoverProcesses = () => processesUnder(dir).filter((p) => p.pid !== watchdog.pid);
  const killEverythingSync = () => {
    for (const d of daemons.values()) if (d.pid !== null) signal(-d.pid, 'SIGKILL');
    for (const p of processesUnder(dir)) signal(p.pid, 'SIGKILL');
  };
  const onExit = () => killEverythingSync();
  process.once('exit', onExit);

  let stopped: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      process.removeListener('exit', onExit);
      // A throwaway topology needs no graceful shutdown: SIGKILL every daemon's group.
      await Promise.all(
        [...daemons.values()].filter((d) => d.pid !== null).map((d) => supervisor.halt(d, 'SIGKILL').catch(() => undefined)),
      );
      // Daemonized job workers and their commands live outside the daemons' groups.
      await waitFor('every topology process to exit', 10_000, () => {
        const left = leftoverProcesses();
        for (const p of left) signal(p.pid, 'SIGKILL');
        return left.length === 0 ? true : undefined;
      }, 50).catch(() => undefined);
      const left = leftoverProcesses();
      if (watchdog.pid !== undefined) signal(watchdog.pid, 'SIGKILL');
      if (left.length > 0) {
        throw new Error(`topology: processes left after stop: ${left.map((p) => `${p.pid} ${p.cmdline}`).join('; ')}`);
      }
      if (removeDir) rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  const topology: Topology = {
    dir,
    saltApiUrl,
    username: credentials.username,
    passwordFile: master.passwordFile,
    eauth: 'file',
    minionIds: [...minionIds],
    ports: { ...ports },
    moduleSha256,
    fileRoot: master.fileRoot,
    masterConfigDir: master.configDir,
    minionConfigDir: (id) => minion(id).configDir,
    extmodsDir: (id) => minion(id).extmodsDir,
    cacheDir: (id) => minion(id).cacheDir,
    receiptDir: (id) => minion(id).receiptDir,
    markerFile: (id) => minion(id).markerFile,
    markerLines: (id) => readLines(minion(id).markerFile),
    logFile: (name) => (name === 'master' || name === 'api' || name === 'key' ? master.logFile(name) : minion(name).logFile),
    stopMaster: (sig = 'SIGTERM') => supervisor.halt(daemon('master'), sig),
    startMaster: async () => {
      await startMasterOnly(60_000);
      if (daemon('api').pid !== null) await client.waitLogin(60_000);
      await client.waitMinionsAnswer(runningMinions(), 60_000);
    },
    stopSaltApi: (sig = 'SIGTERM') => supervisor.halt(daemon('api'), sig),
    startSaltApi: async () => {
      supervisor.launch(daemon('api'));
      await client.waitLogin(60_000);
    },
    stopMinion: (id, sig = 'SIGTERM') => supervisor.halt(daemon(id), sig),
    startMinion: async (id) => {
      supervisor.launch(daemon(id));
      await client.waitMinionsAnswer([id], 60_000);
    },
    daemonPid: (name) => daemon(name).pid,
    // Async so that a failed read rejects, as the interface promises.
    // eslint-disable-next-line @typescript-eslint/require-await -- see above
    jobWorkers: async (id) => readJobWorkers(minion(id).cacheDir, minion(id).configDir),
    // eslint-disable-next-line @typescript-eslint/require-await -- see above
    jobWorkerPids: async (id) => readJobWorkers(minion(id).cacheDir, minion(id).configDir).map((w) => w.pid),
    leftoverProcesses,
    runSaltCli: ([bin, ...args], opts = {}) => {
      if (bin === undefined || !/^salt(-[a-z]+)?$/.test(bin) || bin === 'salt-call' || bin === 'salt-minion') {
        throw new Error('topology: runSaltCli runs a master-side salt CLI (salt, salt-key, salt-run, ...)');
      }
      return supervisor.run(bin, ['-c', master.configDir, ...args], opts.timeoutMs);
    },
    saltCall: (id, args, opts = {}) => supervisor.run('salt-call', ['-c', minion(id).configDir, ...args], opts.timeoutMs),
    login: () => client.login(),
    saltApi: (lowstate, opts) => client.saltApi(lowstate, opts),
    ping: (ids = minionIds) => client.ping(ids),
    applyClientReceipts: (ids = minionIds) => client.applyClientReceipts(ids),
    setRole,
    stop,
  };

  try {
    // Master and salt-api first; minions once the master listens (a minion
    // that finds no master backs off for whole seconds).
    await startMasterOnly(deadlineLeft());
    supervisor.launch(daemon('api'));
    for (const id of minionIds) supervisor.launch(daemon(id));
    await waitFor('minion keys to be accepted', deadlineLeft(), () =>
      minionIds.every((id) => existsSync(master.acceptedKey(id))) ? true : undefined, 50);
    await client.waitLogin(deadlineLeft());
    await client.waitMinionsAnswer(minionIds, deadlineLeft());
    if (install) await checkInstalledModules(topology, tree.moduleSha256);
    return topology;
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

/** client_receipts must find each module the fragment installed intact: no changes, reviewed digest. */
async function checkInstalledModules(topology: Topology, expectedSha256: string): Promise<void> {
  const applied = await topology.applyClientReceipts();
  for (const [id, states] of Object.entries(applied)) {
    const file = Object.entries(states).find(([key]) => key.startsWith(INSTALLED_MODULE_STATE));
    const changes = file?.[1].changes;
    if (!file || (changes !== undefined && JSON.stringify(changes) !== '{}')) {
      throw new Error(`topology: client_receipts changed the installed module on ${id}`);
    }
    if (!verifyInstalledModule(topology.extmodsDir(id), { expectedSha256 }).ok) {
      throw new Error(`topology: installed module on ${id} does not match after client_receipts`);
    }
  }
}

/** Lowercase hex SHA-256 of a file (for tests comparing installed bytes). */
export function fileSha256(path: string): string {
  return sha256Hex(readFileSync(path));
}
