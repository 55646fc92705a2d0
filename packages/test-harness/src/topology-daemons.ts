import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { basename, dirname, join } from 'node:path';
import { delay, isAlive, processGroupMembers, signal, waitFor } from './topology-process.js';
import { watchdogScriptPath } from './topology-paths.js';

/*
 * Process supervision: Salt daemons launched in their own process groups,
 * stopped by signalling the group and waiting until it is empty, one-shot
 * Salt CLIs, and the watchdog that outlives this Node process.
 */

export interface SaltCliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface Daemon {
  name: string;
  bin: string;
  args: string[];
  /** Salt's pidfile and its psutil "process responsibility" file: removed before a restart (see launch). */
  pidfiles: string[];
  child: ChildProcess | null;
  pid: number | null;
  exited: Promise<void> | null;
}

export function newDaemon(name: string, bin: string, configDir: string, pidfile: string): Daemon {
  return {
    name,
    bin,
    args: ['-c', configDir],
    pidfiles: [pidfile, join(dirname(pidfile), `process_responsibility_${basename(pidfile)}`)],
    child: null,
    pid: null,
    exited: null,
  };
}

export interface Supervisor {
  /** Starts the daemon in the foreground, in its own process group, console output to `<logsDir>/<name>.out`. */
  launch(d: Daemon): void;
  /** Signals the daemon's process group and waits until the group is empty; escalates to SIGKILL. */
  halt(d: Daemon, sig?: NodeJS.Signals, graceMs?: number): Promise<void>;
  /** Runs one Salt CLI of the venv to completion (SIGKILLed at the deadline). */
  run(bin: string, args: string[], timeoutMs?: number): Promise<SaltCliResult>;
}

export function createSupervisor(settings: { venv: string; dir: string; logsDir: string }): Supervisor {
  const { venv, dir, logsDir } = settings;

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

  return { launch, halt, run };
}

/**
 * Starts the watchdog (python/topology_watchdog.py) detached: if this Node
 * process dies without stop() (a killed test worker), it SIGKILLs every
 * process of the topology by pid and removes the directory when asked.
 */
export function startWatchdog(venv: string, dir: string, removeDir: boolean): ChildProcess {
  const watchdog = spawn(join(venv, 'bin', 'python'), [watchdogScriptPath(), String(process.pid), dir, removeDir ? '1' : '0'], {
    cwd: '/',
    detached: true,
    stdio: 'ignore',
  });
  watchdog.unref();
  return watchdog;
}

/** `count` distinct free TCP ports on 127.0.0.1 (all held open together while choosing). */
export async function freePorts(count: number): Promise<number[]> {
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

export function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolvePromise(true);
    });
    socket.once('error', () => resolvePromise(false));
  });
}
