import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { basename, dirname, isAbsolute, join, normalize, resolve, sep } from 'node:path';
import {
  MODULE_PATH,
  PACKAGE_ROOT as MINION_WRAPPER_ROOT,
  planCloudInit,
  readAsset,
  sha256Hex,
  verifyInstalledModule,
  writeSaltFileTree,
} from '@oduflow/minion-wrapper';
import { DEFAULT_SLOW_STATE_SECONDS, defaultTestRoles } from './topology-roles.js';
import {
  delay,
  isAlive,
  processGroupMembers,
  readJobWorkers,
  processesUnder,
  signal,
  waitFor,
  type JobWorker,
  type ProcInfo,
} from './topology-process.js';

export * from './topology-roles.js';
export { processesUnder, type JobWorker, type ProcInfo } from './topology-process.js';

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
  /** Module file to install and serve (default: the reviewed minion-wrapper MODULE_PATH). */
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
}

export interface SaltCliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A salt-api low-state chunk (without credentials: the topology adds its token). */
export type LowState = Record<string, unknown>;

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
  logFile(name: 'master' | 'api' | string): string;

  stopMaster(signal?: NodeJS.Signals): Promise<void>;
  /** Starts the master and waits until salt-api logs in and every running minion answers test.ping. */
  startMaster(): Promise<void>;
  stopSaltApi(signal?: NodeJS.Signals): Promise<void>;
  startSaltApi(): Promise<void>;
  stopMinion(minionId: string, signal?: NodeJS.Signals): Promise<void>;
  /** Starts the minion and waits until it answers test.ping. */
  startMinion(minionId: string): Promise<void>;
  /** Main pid of a running daemon (its process group id), or null. */
  daemonPid(name: 'master' | 'api' | string): number | null;
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
  applyClientReceipts(minionIds?: string[]): Promise<Record<string, Record<string, { result: unknown; changes: unknown }>>>;
  /** Replaces (or adds) a file in the master's file_roots; takes effect for the next state run. */
  setRole(relativePath: string, content: string): void;

  /** Tears everything down by pid, verifies nothing is left, removes a mkdtemp dir. Idempotent. */
  stop(): Promise<void>;
}

interface Daemon {
  name: string;
  bin: string;
  args: string[];
  /** Salt's pidfile and its psutil "process responsibility" file: removed before a restart (see launch). */
  pidfiles: string[];
  child: ChildProcess | null;
  pid: number | null;
  exited: Promise<void> | null;
}

const REPO_ROOT = resolve(MINION_WRAPPER_ROOT, '..', '..');

/** argv: parent pid, topology dir, remove-dir flag. Polls the parent; when it is gone, SIGKILLs the topology's processes. */
const WATCHDOG_PY = `
import os, shutil, signal, sys, time
ppid, root, remove = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
prefix, me = root.rstrip("/") + "/", os.getpid()
while True:
    try:
        os.kill(ppid, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(0.5)
def ours():
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cmd = open("/proc/%s/cmdline" % entry, "rb").read().replace(b"\\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        try:
            cwd = os.readlink("/proc/%s/cwd" % entry)
        except OSError:
            cwd = ""
        if prefix in cmd or cwd == root or cwd.startswith(prefix):
            found.append(int(entry))
    return found
for _ in range(100):
    pids = ours()
    if not pids:
        break
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.1)
if remove:
    shutil.rmtree(root, ignore_errors=True)
`;
const SAFE_RELATIVE = /^[A-Za-z0-9._/-]+$/;
const MAX_SOCKET_PATH = 107;

async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolvePromise, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolvePromise(server));
        }),
    ),
  );
  const ports = servers.map((server) => {
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('topology: no port');
    return address.port;
  });
  await Promise.all(servers.map((server) => new Promise<void>((r) => server.close(() => r()))));
  return ports;
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolvePromise(true);
    });
    socket.once('error', () => resolvePromise(false));
  });
}

function writePrivate(path: string, content: string | Buffer, mode = 0o600): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, content, { mode });
  chmodSync(path, mode);
}

function assertRelative(path: string): string {
  const normal = normalize(path);
  if (!SAFE_RELATIVE.test(path) || isAbsolute(path) || normal !== path || normal.split(sep).includes('..')) {
    throw new Error(`topology: file_roots path must be a plain relative path (got ${JSON.stringify(path)})`);
  }
  return path;
}

/** JSON is YAML: Salt reads these configs as YAML. */
const yaml = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export async function startTopology(options: TopologyOptions = {}): Promise<Topology> {
  const startedAt = Date.now();
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const venv = resolve(options.venv ?? process.env.ODUFLOW_VENV ?? join(REPO_ROOT, '.venv'));
  for (const bin of ['salt-master', 'salt-minion', 'salt-api', 'salt']) {
    if (!existsSync(join(venv, 'bin', bin))) {
      throw new Error(`topology: ${join(venv, 'bin', bin)} is missing; run scripts/ensure-python.sh`);
    }
  }
  const minionIds =
    options.minionIds ?? Array.from({ length: options.minions ?? 1 }, () => `client-${randomUUID()}`);
  if (minionIds.length < 1) throw new Error('topology: at least one minion');
  const ownDir = options.dir === undefined;
  const dir = ownDir ? mkdtempSync(join(tmpdir(), 'oduflow-topo-')) : resolve(options.dir as string);
  if (!ownDir) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (readdirSync(dir).length > 0) throw new Error(`topology: ${dir} is not empty`);
  }
  chmodSync(dir, 0o700);
  // Salt's IPC sockets live under each sock_dir; Linux caps socket paths at 108 bytes.
  if (join(dir, 'm00', 'var', 'run', 'salt', 'minion', 'minion_event_0123456789_pull.ipc').length > MAX_SOCKET_PATH) {
    throw new Error(`topology: ${dir} is too long for Salt's unix sockets; use a shorter dir`);
  }

  const user = userInfo().username;
  const logLevel = options.logLevel ?? 'info';
  const [publishPort, retPort, apiPort] = (await freePorts(3)) as [number, number, number];
  const username = 'oduflow';
  const password = randomBytes(24).toString('hex');
  const passwordFile = join(dir, 'api', 'password');
  const eauthFile = join(dir, 'api', 'eauth-users');
  writePrivate(passwordFile, password);
  writePrivate(eauthFile, `${username}:${createHash('sha256').update(password).digest('hex')}\n`);

  // The master's file tree: exactly what `oduflow-minion file-tree` writes, plus test roles.
  const fileRoot = join(dir, 'srv', 'salt');
  mkdirSync(fileRoot, { recursive: true, mode: 0o755 });
  mkdirSync(join(dir, 'srv', 'pillar'), { recursive: true, mode: 0o755 });
  const moduleSource = options.moduleSource ?? MODULE_PATH;
  const tree = writeSaltFileTree(fileRoot, { moduleSource });
  const roles = { ...defaultTestRoles(options.slowStateSeconds ?? DEFAULT_SLOW_STATE_SECONDS), ...(options.roles ?? {}) };
  const setRole = (relativePath: string, content: string) => {
    const path = join(fileRoot, assertRelative(relativePath));
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    writeFileSync(path, content, { mode: 0o644 });
  };
  for (const [path, content] of Object.entries(roles)) setRole(path, content);

  // Salt re-roots every log path under the daemon's root_dir, so logs live there;
  // console output of each daemon goes to <dir>/logs/<name>.out.
  const logsDir = join(dir, 'logs');
  mkdirSync(logsDir, { mode: 0o700 });
  const masterRoot = join(dir, 'master');
  const minionRoots = new Map<string, string>();
  const masterConfigDir = join(masterRoot, 'etc', 'salt');
  writePrivate(
    join(masterConfigDir, 'master'),
    yaml({
      root_dir: masterRoot,
      interface: '127.0.0.1',
      publish_port: publishPort,
      ret_port: retPort,
      user,
      auto_accept: true,
      worker_threads: 3,
      file_roots: { base: [fileRoot] },
      pillar_roots: { base: [join(dir, 'srv', 'pillar')] },
      fileserver_backend: ['roots'],
      log_file: join(masterRoot, 'log', 'master.log'),
      key_logfile: join(masterRoot, 'log', 'key.log'),
      api_logfile: join(masterRoot, 'log', 'api.log'),
      api_pidfile: join(masterRoot, 'salt-api.pid'),
      log_level_logfile: logLevel,
      netapi_enable_clients: ['local', 'local_async'],
      external_auth: { file: { '^filename': eauthFile, '^filetype': 'text', '^hashtype': 'sha256', [username]: ['.*'] } },
      rest_cherrypy: { host: '127.0.0.1', port: apiPort, disable_ssl: true },
      enable_fqdns_grains: false,
      enable_gpu_grains: false,
    }),
    0o600,
  );

  // Minions: short per-index roots (socket path limit); production install of the module.
  let moduleSha256: string | null = null;
  const moduleBytes = readAsset(moduleSource, 'module source');
  minionIds.forEach((id, index) => {
    const root = join(dir, `m${String(index).padStart(2, '0')}`);
    minionRoots.set(id, root);
    mkdirSync(join(root, 'work'), { recursive: true, mode: 0o700 });
    chmodSync(root, 0o700);
    const configDir = join(root, 'etc', 'salt');
    writePrivate(
      join(configDir, 'minion'),
      yaml({
        root_dir: root,
        master_port: retPort,
        publish_port: publishPort,
        user,
        log_file: join(root, 'log', 'minion.log'),
        log_level_logfile: logLevel,
        oduflow_receipt_dir: join(root, 'receipts'),
        oduflow_test_marker: join(root, 'marker'),
        oduflow_test_workdir: join(root, 'work'),
        // fast lost-return tests and fast reconnects
        return_retry_timer: 1,
        return_retry_timer_max: 2,
        return_retry_tries: 1,
        acceptance_wait_time: 1,
        acceptance_wait_time_max: 2,
        random_reauth_delay: 0,
        recon_default: 100,
        recon_max: 1000,
        recon_randomize: false,
        auth_timeout: 5,
        enable_fqdns_grains: false,
        enable_gpu_grains: false,
        mine_enabled: false,
        grains_refresh_every: 0,
      }),
      0o600,
    );
    // The cloud-init fragment, applied chroot-style under the minion root:
    // write_files (module + minion.d include), then runcmd's sha256sum check.
    const plan = planCloudInit({ minionId: id, masterHost: '127.0.0.1', module: moduleBytes });
    const install = options.installModule ?? true;
    for (const file of plan.files) {
      if (!install && file.path === plan.modulePath) continue;
      const target = join(root, file.path);
      mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
      writeFileSync(target, file.content, { mode: Number.parseInt(file.permissions, 8) });
      chmodSync(target, Number.parseInt(file.permissions, 8));
    }
    if (install) {
      const check = spawnSync('sha256sum', ['--check', '--strict', '--status', '-'], {
        input: `${plan.moduleSha256}  ${join(root, plan.modulePath)}\n`,
      });
      const verified = verifyInstalledModule(join(root, plan.extmodsDir), { expectedSha256: plan.moduleSha256 });
      if (check.status !== 0 || !verified.ok) {
        throw new Error(`topology: installed module failed verification (${verified.status})`);
      }
      moduleSha256 = plan.moduleSha256;
    }
  });
  if (moduleSha256 !== null && moduleSha256 !== tree.moduleSha256) throw new Error('topology: file tree and install differ');

  const rootOf = (id: string): string => {
    const root = minionRoots.get(id);
    if (root === undefined) throw new Error(`topology: unknown minion ${JSON.stringify(id)}`);
    return root;
  };
  const extmodsDir = (id: string) => join(rootOf(id), 'var', 'cache', 'salt', 'minion', 'extmods');
  const cacheDir = (id: string) => join(rootOf(id), 'var', 'cache', 'salt', 'minion');
  const minionConfigDir = (id: string) => join(rootOf(id), 'etc', 'salt');
  const markerFile = (id: string) => join(rootOf(id), 'marker');
  const logFile = (name: string) =>
    name === 'master' || name === 'api' || name === 'key'
      ? join(masterRoot, 'log', `${name}.log`)
      : join(rootOf(name), 'log', 'minion.log');

  // Pre-seed RSA key pairs (what Salt would generate on first start, in
  // Python, ~3 s each on 2 cores): PKCS#1 private key 0400, SPKI public key.
  const seedKeys = (pkiDir: string, name: string) => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      publicKeyEncoding: { type: 'spki', format: 'pem' },
      privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    });
    mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
    writePrivate(join(pkiDir, `${name}.pem`), privateKey, 0o400);
    writePrivate(join(pkiDir, `${name}.pub`), publicKey, 0o644);
  };
  seedKeys(join(masterRoot, 'etc', 'salt', 'pki', 'master'), 'master');
  for (const id of minionIds) seedKeys(join(minionConfigDir(id), 'pki', 'minion'), 'minion');

  const daemons = new Map<string, Daemon>();
  const pidfiles = (pidfile: string) => [pidfile, join(dirname(pidfile), `process_responsibility_${basename(pidfile)}`)];
  const newDaemon = (name: string, bin: string, configDir: string, pidfile: string): Daemon => ({
    name,
    bin,
    args: ['-c', configDir],
    pidfiles: pidfiles(pidfile),
    child: null,
    pid: null,
    exited: null,
  });
  daemons.set('master', newDaemon('master', 'salt-master', masterConfigDir, join(masterRoot, 'var', 'run', 'salt-master.pid')));
  daemons.set('api', newDaemon('api', 'salt-api', masterConfigDir, join(masterRoot, 'salt-api.pid')));
  for (const id of minionIds) {
    daemons.set(id, newDaemon(id, 'salt-minion', minionConfigDir(id), join(rootOf(id), 'var', 'run', 'salt-minion.pid')));
  }
  const daemon = (name: string): Daemon => {
    const d = daemons.get(name);
    if (d === undefined) throw new Error(`topology: unknown daemon ${JSON.stringify(name)}`);
    return d;
  };

  const launch = (d: Daemon) => {
    if (d.pid !== null && isAlive(d.pid)) throw new Error(`topology: ${d.name} is already running`);
    // halt() proved the previous instance's process group empty. Its killed
    // processes may remain zombies (a container init that does not reap), and
    // Salt's psutil check counts a zombie as "an instance is already running".
    for (const file of d.pidfiles) rmSync(file, { force: true });
    const out = openSync(join(logsDir, `${d.name}.out`), 'a', 0o600);
    try {
      // Own process group (detached) so a signal reaches the daemon and its
      // non-daemonized children; foreground (no -d), console logs to a file.
      const child = spawn(join(venv, 'bin', d.bin), [...d.args, '-l', 'warning'], {
        cwd: dir,
        detached: true,
        stdio: ['ignore', out, out],
        env: { ...process.env, PYTHONUNBUFFERED: '1' },
      });
      if (child.pid === undefined) throw new Error(`topology: could not spawn ${d.bin}`);
      d.child = child;
      d.pid = child.pid;
      d.exited = new Promise<void>((r) => child.once('exit', () => r()));
    } finally {
      closeSync(out);
    }
  };

  /** Signals the daemon's process group and waits until the group is empty; escalates to SIGKILL. */
  const halt = async (d: Daemon, sig: NodeJS.Signals = 'SIGTERM', graceMs = 3_000) => {
    const pgid = d.pid;
    if (pgid === null) return;
    signal(-pgid, sig);
    if (sig === 'SIGSTOP') return;
    const gone = () => (processGroupMembers(pgid).length === 0 ? true : undefined);
    try {
      await waitFor(`${d.name} to exit after ${sig}`, graceMs, gone, 50);
    } catch {
      signal(-pgid, 'SIGKILL');
      await waitFor(`${d.name} to exit after SIGKILL`, 10_000, gone, 50);
    }
    await Promise.race([d.exited, delay(2_000)]);
    d.child = null;
    d.pid = null;
    d.exited = null;
  };

  const deadlineLeft = () => Math.max(5_000, startTimeoutMs - (Date.now() - startedAt));

  let token: string | null = null;
  const saltApiUrl = `http://127.0.0.1:${apiPort}`;
  const login = async (): Promise<string> => {
    const response = await fetch(`${saltApiUrl}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ username, password, eauth: 'file' }),
      signal: AbortSignal.timeout(10_000),
    });
    if (response.status !== 200) throw new Error(`salt-api login answered HTTP ${response.status}`);
    const body = (await response.json()) as { return?: Array<{ token?: string }> };
    const value = body.return?.[0]?.token;
    if (typeof value !== 'string') throw new Error('salt-api login returned no token');
    token = value;
    return value;
  };
  const saltApi = async (lowstate: LowState | LowState[], opts: { timeoutMs?: number } = {}): Promise<unknown[]> => {
    for (let attempt = 0; ; attempt += 1) {
      const current = token ?? (await login());
      const response = await fetch(saltApiUrl, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Auth-Token': current },
        body: JSON.stringify(Array.isArray(lowstate) ? lowstate : [lowstate]),
        signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000),
      });
      if (response.status === 401 && attempt === 0) {
        token = null;
        continue;
      }
      if (response.status !== 200) throw new Error(`salt-api answered HTTP ${response.status}: ${await response.text()}`);
      const body = (await response.json()) as { return?: unknown[] };
      if (!Array.isArray(body.return)) throw new Error('salt-api answer has no return array');
      return body.return;
    }
  };
  const ping = async (ids: string[] = minionIds): Promise<Record<string, unknown>> => {
    // Short timeouts: a minion that is not connected yet costs one short round, not 5 s + gather_job_timeout.
    const [answer] = await saltApi({ client: 'local', tgt: ids, tgt_type: 'list', fun: 'test.ping', timeout: 2, gather_job_timeout: 1 });
    return (answer ?? {}) as Record<string, unknown>;
  };
  const waitMinionsAnswer = async (ids: string[], timeoutMs: number) => {
    const pending = new Set(ids);
    await waitFor(`minions ${[...pending].join(', ')} to answer test.ping`, timeoutMs, async () => {
      const answer = await ping([...pending]);
      for (const id of [...pending]) if (answer[id] === true) pending.delete(id);
      return pending.size === 0 ? true : undefined;
    }, 200);
  };
  const keyAccepted = (id: string) => existsSync(join(masterRoot, 'etc', 'salt', 'pki', 'master', 'minions', id));

  const startMasterOnly = async (timeoutMs: number) => {
    launch(daemon('master'));
    await waitFor('salt-master to listen', timeoutMs, async () => ((await tcpOpen(retPort)) ? true : undefined), 50);
    const workers = join(masterRoot, 'var', 'run', 'salt', 'master', 'workers.ipc');
    await waitFor('salt-master workers', timeoutMs, () => (existsSync(workers) ? true : undefined), 50);
  };
  const runningMinions = () => minionIds.filter((id) => daemon(id).pid !== null);
  const waitApiLogin = (timeoutMs: number) =>
    waitFor('salt-api to accept a login', timeoutMs, async () => (await login()) || undefined, 200);

  const run = (bin: string, args: string[], timeoutMs = 120_000): Promise<SaltCliResult> =>
    new Promise((resolvePromise, reject) => {
      const child = spawn(join(venv, 'bin', bin), args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('close', (code) => {
        clearTimeout(timer);
        resolvePromise({ code, stdout, stderr });
      });
    });

  // A watchdog outlives this Node process: if it dies without stop() (a
  // killed test worker), every process of the topology is killed by pid.
  const watchdog = spawn(
    join(venv, 'bin', 'python'),
    ['-c', WATCHDOG_PY, String(process.pid), dir, ownDir && !options.keepDir ? '1' : '0'],
    { cwd: '/', detached: true, stdio: 'ignore' },
  );
  watchdog.unref();
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
        [...daemons.values()].filter((d) => d.pid !== null).map((d) => halt(d, 'SIGKILL').catch(() => undefined)),
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
      if (ownDir && !options.keepDir) rmSync(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  const topology: Topology = {
    dir,
    saltApiUrl,
    username,
    passwordFile,
    eauth: 'file',
    minionIds: [...minionIds],
    ports: { publish: publishPort, ret: retPort, api: apiPort },
    moduleSha256,
    fileRoot,
    masterConfigDir,
    minionConfigDir,
    extmodsDir,
    cacheDir,
    receiptDir: (id) => join(rootOf(id), 'receipts'),
    markerFile,
    markerLines: (id) => {
      try {
        return readFileSync(markerFile(id), 'utf8').split('\n').filter((line) => line !== '');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw error;
      }
    },
    logFile,
    stopMaster: (sig = 'SIGTERM') => halt(daemon('master'), sig),
    startMaster: async () => {
      await startMasterOnly(60_000);
      if (daemon('api').pid !== null) await waitApiLogin(60_000);
      await waitMinionsAnswer(runningMinions(), 60_000);
    },
    stopSaltApi: (sig = 'SIGTERM') => halt(daemon('api'), sig),
    startSaltApi: async () => {
      launch(daemon('api'));
      await waitApiLogin(60_000);
    },
    stopMinion: (id, sig = 'SIGTERM') => halt(daemon(id), sig),
    startMinion: async (id) => {
      launch(daemon(id));
      await waitMinionsAnswer([id], 60_000);
    },
    daemonPid: (name) => daemon(name).pid,
    jobWorkers: async (id) => readJobWorkers(cacheDir(id), minionConfigDir(id)),
    jobWorkerPids: async (id) => readJobWorkers(cacheDir(id), minionConfigDir(id)).map((w) => w.pid),
    leftoverProcesses,
    runSaltCli: ([bin, ...args] = [], opts = {}) => {
      if (bin === undefined || !/^salt(-[a-z]+)?$/.test(bin) || bin === 'salt-call' || bin === 'salt-minion') {
        throw new Error('topology: runSaltCli runs a master-side salt CLI (salt, salt-key, salt-run, ...)');
      }
      return run(bin, ['-c', masterConfigDir, ...args], opts.timeoutMs);
    },
    saltCall: (id, args, opts = {}) => run('salt-call', ['-c', minionConfigDir(id), ...args], opts.timeoutMs),
    login,
    saltApi,
    ping,
    applyClientReceipts: async (ids = minionIds) => {
      const [answer] = await saltApi(
        { client: 'local', tgt: ids, tgt_type: 'list', fun: 'state.apply', arg: ['client_receipts'], timeout: 60 },
        { timeoutMs: 90_000 },
      );
      const results = (answer ?? {}) as Record<string, unknown>;
      const out: Record<string, Record<string, { result: unknown; changes: unknown }>> = {};
      for (const id of ids) {
        const states = results[id];
        if (states === null || typeof states !== 'object' || Array.isArray(states)) {
          throw new Error(`topology: client_receipts did not return a state mapping for ${id}: ${JSON.stringify(states)}`);
        }
        const mapping = states as Record<string, { result: unknown; changes: unknown; comment?: unknown }>;
        const failed = Object.entries(mapping).filter(([, s]) => s.result !== true);
        if (Object.keys(mapping).length === 0 || failed.length > 0) {
          throw new Error(`topology: client_receipts failed on ${id}: ${JSON.stringify(failed)}`);
        }
        out[id] = Object.fromEntries(Object.entries(mapping).map(([k, s]) => [k, { result: s.result, changes: s.changes }]));
      }
      return out;
    },
    setRole,
    stop,
  };

  try {
    // Master and salt-api first; minions once the master listens (a minion
    // that finds no master backs off for whole seconds).
    await startMasterOnly(deadlineLeft());
    launch(daemon('api'));
    for (const id of minionIds) launch(daemon(id));
    await waitFor('minion keys to be accepted', deadlineLeft(), () => (minionIds.every(keyAccepted) ? true : undefined), 50);
    await waitApiLogin(deadlineLeft());
    await waitMinionsAnswer(minionIds, deadlineLeft());
    if (options.installModule ?? true) {
      const applied = await topology.applyClientReceipts();
      for (const [id, states] of Object.entries(applied)) {
        const file = Object.entries(states).find(([key]) => key.startsWith('file_|-oduflow_job_module_|-'));
        const changes = file?.[1].changes;
        if (!file || (changes !== undefined && JSON.stringify(changes) !== '{}')) {
          throw new Error(`topology: client_receipts changed the installed module on ${id}`);
        }
        if (!verifyInstalledModule(extmodsDir(id), { expectedSha256: tree.moduleSha256 }).ok) {
          throw new Error(`topology: installed module on ${id} does not match after client_receipts`);
        }
      }
    }
    return topology;
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

/** Lowercase hex SHA-256 of a file (for tests comparing installed bytes). */
export function fileSha256(path: string): string {
  return sha256Hex(readFileSync(path));
}
