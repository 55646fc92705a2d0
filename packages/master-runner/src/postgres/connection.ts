import type { PoolConfig } from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import { readPrivatePasswordFile } from '../credentials.js';
import { MasterRunnerError } from '../errors.js';

/*
 * How a PostgreSQL store is reached: a postgres:// URL, the password from a
 * private file (preferred) or from the URL, and the pool settings. The URL
 * is parsed once here; what operators see of it (`location`) never carries
 * the password, and no error here quotes the URL.
 */

export interface PostgresStoreOptions {
  /** `postgres://user@host:port/db` (a password in the URL works but is discouraged: it shows in process listings and shell history). */
  readonly connectionString: string;
  /** Absolute path of a private file (0600, owned by this user, no symlink) holding the password. */
  readonly passwordFile?: string;
  /** Connections in the pool (default 10). */
  readonly poolSize?: number;
  /** How long a unit waits for a row lock (or a free connection) before failing store_busy (default 30 000 ms). */
  readonly lockTimeoutMs?: number;
}

export const DEFAULT_POOL_SIZE = 10;
export const DEFAULT_LOCK_TIMEOUT_MS = 30_000;

/** URL query parameters shown in `location`: none of them can hold a secret. */
const SHOWN_PARAMETERS = ['host', 'sslmode', 'application_name'] as const;

export interface ResolvedConnection {
  /** The URL without its password and without any parameter that could hold a secret. */
  readonly location: string;
  readonly pool: PoolConfig;
  readonly lockTimeoutMs: number;
}

function configInvalid(message: string): MasterRunnerError {
  return new MasterRunnerError('config_invalid', message);
}

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen <= 0) throw configInvalid(`the PostgreSQL ${what} must be a positive whole number`);
  return chosen;
}

function parseUrl(connectionString: string): URL {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw configInvalid('the PostgreSQL connection string is not a URL (postgres://user@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw configInvalid('the PostgreSQL connection string must start with postgres:// or postgresql://');
  }
  return url;
}

/** What operators see of the URL: scheme, user, host, port, database and harmless parameters. */
export function redactedLocation(url: URL): string {
  const user = url.username === '' ? '' : `${url.username}@`;
  const shown = new URLSearchParams();
  for (const name of SHOWN_PARAMETERS) {
    const value = url.searchParams.get(name);
    if (value !== null) shown.set(name, value);
  }
  const query = shown.size === 0 ? '' : `?${shown.toString()}`;
  return `${url.protocol}//${user}${url.host}${url.pathname}${query}`;
}

export function resolveConnection(options: PostgresStoreOptions): ResolvedConnection {
  if (typeof options.connectionString !== 'string') throw configInvalid('the PostgreSQL connection string is missing');
  const url = parseUrl(options.connectionString);
  const poolSize = positiveInteger(options.poolSize, DEFAULT_POOL_SIZE, 'pool size');
  const lockTimeoutMs = positiveInteger(options.lockTimeoutMs, DEFAULT_LOCK_TIMEOUT_MS, 'lock timeout');
  const urlPassword = url.password !== '' || url.searchParams.has('password');
  let password: string | undefined;
  if (options.passwordFile !== undefined) {
    // Two sources would leave the operator guessing which one is used.
    if (urlPassword) throw configInvalid('give the PostgreSQL password in the password file or in the URL, not both');
    password = readPrivatePasswordFile(options.passwordFile, 'PostgreSQL password file');
  }
  let parsed;
  try {
    parsed = parseIntoClientConfig(options.connectionString);
  } catch {
    throw configInvalid('the PostgreSQL connection string cannot be read (check its host, port and parameters)');
  }
  const pool: PoolConfig = {
    ...parsed,
    // The URL has no password when a file gives it (checked above); the file's wins over the empty one parsed.
    ...(password === undefined ? {} : { password }),
    max: poolSize,
    // Waiting for a free connection is waiting for a lock: same bound (and the TCP connect's).
    connectionTimeoutMillis: lockTimeoutMs,
    lock_timeout: lockTimeoutMs,
    // A holder that stopped (SIGSTOP, a hung host) must not keep a target locked for ever.
    idle_in_transaction_session_timeout: 2 * lockTimeoutMs,
    keepAlive: true,
    fallback_application_name: 'oduflow-master',
  };
  return { location: redactedLocation(url), pool, lockTimeoutMs };
}
