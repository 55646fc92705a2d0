import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/*
 * A throwaway PostgreSQL 15 cluster for tests and benchmarks: Debian's server
 * binaries, a fresh data directory in a temp dir, listening only on
 * 127.0.0.1 with password (SCRAM) authentication, durability settings left
 * at their defaults (fsync on) so what a test measures is what production
 * gets. PostgreSQL refuses to run as root, so as root the cluster runs as an
 * unprivileged system user created on first use. A missing server fails
 * loudly (scripts/ensure-postgres.sh installs it); nothing here skips.
 */

export const POSTGRES_BIN_DIR = '/usr/lib/postgresql/15/bin';
/** The unprivileged account the cluster runs as when the tests run as root. */
export const POSTGRES_OS_USER = 'oduflow-pg';

export interface PostgresOptions {
  /** Deadline for initdb + start (default 60 s). */
  readonly startTimeoutMs?: number;
  /** Extra `-c name=value` server settings (e.g. `{ max_connections: '200' }`). */
  readonly settings?: Readonly<Record<string, string>>;
}

export interface PostgresCluster {
  /** `postgres://oduflow:<password>@127.0.0.1:<port>/oduflow` */
  readonly url: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
  readonly dataDir: string;
  /** A URL for another database of this cluster (see createDatabase). */
  urlFor(database: string): string;
  /** Creates an empty database owned by the cluster's user; returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Runs SQL through psql as the cluster's user; returns stdout. */
  psql(sql: string, database?: string): Promise<string>;
  /**
   * Stops the server and removes the data directory. Idempotent. Immediate
   * shutdown: the data is thrown away, so a shutdown checkpoint (which after
   * many CREATE DATABASEs can take longer than a test hook allows) is waste.
   */
  stop(): Promise<void>;
}

interface RunAs {
  readonly uid?: number;
  readonly gid?: number;
}

function requireServerBinaries(): void {
  for (const name of ['initdb', 'pg_ctl', 'postgres', 'psql']) {
    const path = name === 'psql' ? '/usr/bin/psql' : join(POSTGRES_BIN_DIR, name);
    if (!existsSync(path)) {
      throw new Error(`postgres: ${path} is missing; run scripts/ensure-postgres.sh (as root it installs Debian's postgresql-15)`);
    }
  }
}

/** As root: the uid/gid of the unprivileged cluster owner, created when missing. */
function clusterOwner(): RunAs {
  if (process.getuid?.() !== 0) return {};
  const lookup = () => spawnSync('id', ['-u', POSTGRES_OS_USER], { encoding: 'utf8' });
  if (lookup().status !== 0) {
    const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', POSTGRES_OS_USER], { encoding: 'utf8' });
    // A concurrent test process may have created it meanwhile.
    if (made.status !== 0 && lookup().status !== 0) throw new Error(`postgres: cannot create user ${POSTGRES_OS_USER}: ${made.stderr.trim()}`);
  }
  const uid = Number(lookup().stdout.trim());
  const gid = Number(spawnSync('id', ['-g', POSTGRES_OS_USER], { encoding: 'utf8' }).stdout.trim());
  if (!Number.isInteger(uid) || !Number.isInteger(gid) || uid === 0) throw new Error(`postgres: ${POSTGRES_OS_USER} has no usable uid`);
  return { uid, gid };
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (address !== null && typeof address === 'object' ? resolvePort(address.port) : reject(new Error('postgres: no port'))));
    });
  });
}

function run(command: string, args: readonly string[], as: RunAs, timeoutMs: number, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, {
      ...as,
      cwd: '/',
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolveRun(stdout);
      else reject(new Error(`postgres: ${command.split('/').pop()} ${args[0] ?? ''} failed (${signal ?? code}): ${stderr.trim().slice(-2000)}`));
    });
  });
}

/** Starts a fresh cluster; the caller must `stop()` it (tests: in afterAll). */
export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresCluster> {
  requireServerBinaries();
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const owner = clusterOwner();
  const root = mkdtempSync(join(tmpdir(), 'oduflow-pg-'));
  const dataDir = join(root, 'data');
  const user = 'oduflow';
  const database = 'oduflow';
  const password = randomBytes(18).toString('base64url');
  const passwordFile = join(root, 'pwfile');
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  if (owner.uid !== undefined && owner.gid !== undefined) {
    chownSync(root, owner.uid, owner.gid);
    chownSync(passwordFile, owner.uid, owner.gid);
  }
  chmodSync(root, 0o700);
  const port = await freePort();
  let started = false;
  const stop = async (): Promise<void> => {
    if (started) {
      started = false;
      await run(join(POSTGRES_BIN_DIR, 'pg_ctl'), ['stop', '-D', dataDir, '-m', 'immediate', '-w', '-t', '30'], owner, 40_000).catch(() => {
        // A server that will not stop cleanly must not outlive the tests.
        const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGKILL');
      });
    }
    rmSync(root, { recursive: true, force: true });
  };
  try {
    await run(
      join(POSTGRES_BIN_DIR, 'initdb'),
      ['-D', dataDir, '-U', user, `--pwfile=${passwordFile}`, '--auth-host=scram-sha-256', '--auth-local=scram-sha-256', '-E', 'UTF8', '--no-instructions'],
      owner,
      timeoutMs,
    );
    const settings: Record<string, string> = {
      listen_addresses: '127.0.0.1',
      port: String(port),
      unix_socket_directories: root,
      ...options.settings,
    };
    const serverArgs = Object.entries(settings)
      .map(([name, value]) => `-c ${name}=${value}`)
      .join(' ');
    await run(join(POSTGRES_BIN_DIR, 'pg_ctl'), ['start', '-D', dataDir, '-l', join(root, 'server.log'), '-w', '-t', String(Math.ceil(timeoutMs / 1000)), '-o', serverArgs], owner, timeoutMs);
    started = true;
    const urlFor = (name: string) => `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${name}`;
    const psql = (sql: string, db = 'postgres') =>
      run('/usr/bin/psql', ['-X', '-q', '-t', '-A', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', String(port), '-U', user, '-d', db, '-c', sql], {}, 30_000, {
        PGPASSWORD: password,
      });
    await psql(`CREATE DATABASE ${database}`);
    return {
      url: urlFor(database),
      port,
      user,
      password,
      database,
      dataDir,
      urlFor,
      psql,
      createDatabase: async (name: string) => {
        if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error('postgres: database names are lowercase identifiers');
        await psql(`CREATE DATABASE ${name}`);
        return urlFor(name);
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
