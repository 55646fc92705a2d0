import { DEFAULT_FILE_STORE_ROOT, MasterRunnerError } from '@oduflow/master-runner';

/*
 * Configuration comes from flags first, then the environment. Only names and
 * paths are configured here: the password itself is read later, from a
 * private file, by the Salt client.
 */

export interface CommonFlags {
  readonly store?: string;
  readonly storePasswordFile?: string;
  readonly storePoolSize?: string;
  readonly saltApiUrl?: string;
  readonly saltApiUser?: string;
  readonly saltApiPasswordFile?: string;
  readonly saltApiEauth?: string;
  readonly callTimeout?: string;
  readonly logLevel?: string;
  readonly json?: boolean;
}

/** A directory (the embedded file store) or a PostgreSQL URL. */
export type StoreConfig =
  | { readonly kind: 'file'; readonly store: string }
  | {
      readonly kind: 'postgres';
      readonly connectionString: string;
      /** A private (0600) file holding the database password (better than one in the URL). */
      readonly passwordFile?: string;
      readonly poolSize?: number;
    };

export interface SaltConfig {
  readonly url: string;
  readonly username: string;
  readonly passwordFile: string;
  readonly eauth: string;
  readonly callTimeoutMs: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function pick(flag: string | undefined, env: Env, name: string): string | undefined {
  const value = flag ?? env[name];
  return value === undefined || value === '' ? undefined : value;
}

function isPostgresUrl(store: string): boolean {
  return store.startsWith('postgres://') || store.startsWith('postgresql://');
}

export function storeConfig(flags: CommonFlags, env: Env): StoreConfig {
  const store = pick(flags.store, env, 'ODUFLOW_STORE') ?? DEFAULT_FILE_STORE_ROOT;
  const passwordFile = pick(flags.storePasswordFile, env, 'ODUFLOW_STORE_PASSWORD_FILE');
  const poolSize = pick(flags.storePoolSize, env, 'ODUFLOW_STORE_POOL_SIZE');
  if (!isPostgresUrl(store)) {
    if (passwordFile !== undefined || poolSize !== undefined) {
      throw new MasterRunnerError('config_invalid', 'a store password file and pool size apply only to a postgres:// store');
    }
    return { kind: 'file', store };
  }
  const pool = poolSize === undefined ? undefined : Number(poolSize);
  if (pool !== undefined && (!/^[0-9]+$/.test(poolSize ?? '') || !Number.isSafeInteger(pool) || pool < 1 || pool > 1000)) {
    throw new MasterRunnerError('config_invalid', 'the store pool size must be a whole number from 1 to 1000');
  }
  return {
    kind: 'postgres',
    connectionString: store,
    ...(passwordFile === undefined ? {} : { passwordFile }),
    ...(pool === undefined ? {} : { poolSize: pool }),
  };
}

/** The file store's directory, for the commands that only apply to one. */
export function fileStoreRoot(config: StoreConfig, command: string, instead: string): string {
  if (config.kind === 'file') return config.store;
  throw new MasterRunnerError('config_invalid', `${command} is for a file store; for PostgreSQL use ${instead}`);
}

function required(value: string | undefined, flag: string, name: string): string {
  if (value === undefined) throw new MasterRunnerError('config_invalid', `set ${flag} or ${name}`);
  return value;
}

export function saltConfig(flags: CommonFlags, env: Env): SaltConfig {
  const timeout = pick(flags.callTimeout, env, 'ODUFLOW_CALL_TIMEOUT_MS') ?? '30000';
  const callTimeoutMs = Number(timeout);
  if (!Number.isSafeInteger(callTimeoutMs) || callTimeoutMs <= 0) {
    throw new MasterRunnerError('config_invalid', 'the call timeout must be a positive number of milliseconds');
  }
  return {
    url: required(pick(flags.saltApiUrl, env, 'ODUFLOW_SALT_API_URL'), '--salt-api-url', 'ODUFLOW_SALT_API_URL'),
    username: required(pick(flags.saltApiUser, env, 'ODUFLOW_SALT_API_USER'), '--salt-api-user', 'ODUFLOW_SALT_API_USER'),
    passwordFile: required(
      pick(flags.saltApiPasswordFile, env, 'ODUFLOW_SALT_API_PASSWORD_FILE'),
      '--salt-api-password-file',
      'ODUFLOW_SALT_API_PASSWORD_FILE',
    ),
    eauth: pick(flags.saltApiEauth, env, 'ODUFLOW_SALT_API_EAUTH') ?? 'pam',
    callTimeoutMs,
  };
}
