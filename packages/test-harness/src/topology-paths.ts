import { chmodSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DEFAULT_EXTMODS_DIR, DEFAULT_MINION_CACHE_DIR } from '@oduflow/minion-wrapper';
import { harnessRoot } from './package-root.js';

/*
 * Where everything of a local topology lives. Each daemon has its own Salt
 * root_dir; Salt re-roots its default paths (cachedir, extension_modules,
 * pidfile, sock_dir, log files) under it, so a minion's paths are the
 * production defaults below its root.
 */

/** The repository root (this package sits in `<repo>/packages/`): the default venv is `<repo>/.venv`. */
export function repoRoot(): string {
  return resolve(harnessRoot(), '..', '..');
}

/** The watchdog script shipped in this package's python/ (found from the package root, like the fixtures). */
export function watchdogScriptPath(): string {
  return join(harnessRoot(), 'python', 'topology_watchdog.py');
}

/** Linux caps unix socket paths at 108 bytes including the NUL. */
const MAX_SOCKET_PATH = 107;

export interface TopologyDir {
  dir: string;
  /** Created here by mkdtemp (and so removed on stop unless kept). */
  ownDir: boolean;
}

/** A fresh mkdtemp, or the requested directory if it is empty or absent; 0700 either way. */
export function prepareTopologyDir(requested: string | undefined): TopologyDir {
  const ownDir = requested === undefined;
  const dir = requested === undefined ? mkdtempSync(join(tmpdir(), 'oduflow-topo-')) : resolve(requested);
  if (!ownDir) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (readdirSync(dir).length > 0) throw new Error(`topology: ${dir} is not empty`);
  }
  chmodSync(dir, 0o700);
  // Salt's IPC sockets live under each sock_dir.
  if (join(dir, 'm00', 'var', 'run', 'salt', 'minion', 'minion_event_0123456789_pull.ipc').length > MAX_SOCKET_PATH) {
    throw new Error(`topology: ${dir} is too long for Salt's unix sockets; use a shorter dir`);
  }
  return { dir, ownDir };
}

export interface MasterPaths {
  /** salt-master's and salt-api's root_dir. */
  root: string;
  configDir: string;
  pkiDir: string;
  /** Console output of every daemon: `<logsDir>/<name>.out`. */
  logsDir: string;
  fileRoot: string;
  pillarRoot: string;
  passwordFile: string;
  eauthFile: string;
  /** Salt's log file of the master, salt-api or the key manager. */
  logFile(name: 'master' | 'api' | 'key'): string;
  masterPidfile: string;
  apiPidfile: string;
  /** Exists once the master's worker pool is up. */
  workersIpc: string;
  /** A minion's key appears here once the master accepted it. */
  acceptedKey(minionId: string): string;
}

export function masterPaths(dir: string): MasterPaths {
  const root = join(dir, 'master');
  const configDir = join(root, 'etc', 'salt');
  const pkiDir = join(configDir, 'pki', 'master');
  return {
    root,
    configDir,
    pkiDir,
    logsDir: join(dir, 'logs'),
    fileRoot: join(dir, 'srv', 'salt'),
    pillarRoot: join(dir, 'srv', 'pillar'),
    passwordFile: join(dir, 'api', 'password'),
    eauthFile: join(dir, 'api', 'eauth-users'),
    logFile: (name) => join(root, 'log', `${name}.log`),
    masterPidfile: join(root, 'var', 'run', 'salt-master.pid'),
    apiPidfile: join(root, 'salt-api.pid'),
    workersIpc: join(root, 'var', 'run', 'salt', 'master', 'workers.ipc'),
    acceptedKey: (minionId) => join(pkiDir, 'minions', minionId),
  };
}

export interface MinionPaths {
  /** The minion's root_dir: `<dir>/mNN` (short, for the socket path limit). */
  root: string;
  configDir: string;
  pkiDir: string;
  extmodsDir: string;
  cacheDir: string;
  receiptDir: string;
  /** Side-effect counter of the test roles. */
  markerFile: string;
  /** Where the test roles work (and run their commands). */
  workDir: string;
  logFile: string;
  pidfile: string;
}

export function minionPaths(dir: string, index: number): MinionPaths {
  const root = join(dir, `m${String(index).padStart(2, '0')}`);
  const configDir = join(root, 'etc', 'salt');
  return {
    root,
    configDir,
    pkiDir: join(configDir, 'pki', 'minion'),
    // path.join keeps the absolute production default below the root, as Salt's root_dir does
    extmodsDir: join(root, DEFAULT_EXTMODS_DIR),
    cacheDir: join(root, DEFAULT_MINION_CACHE_DIR),
    receiptDir: join(root, 'receipts'),
    markerFile: join(root, 'marker'),
    workDir: join(root, 'work'),
    logFile: join(root, 'log', 'minion.log'),
    pidfile: join(root, 'var', 'run', 'salt-minion.pid'),
  };
}
