import { DEFAULT_FILE_STORE_ROOT, MasterRunnerError } from '@oduflow/master-runner';

/*
 * Configuration comes from flags first, then the environment. Only names and
 * paths are configured here: the password itself is read later, from a
 * private file, by the Salt client.
 */

export interface CommonFlags {
  readonly store?: string;
  readonly saltApiUrl?: string;
  readonly saltApiUser?: string;
  readonly saltApiPasswordFile?: string;
  readonly saltApiEauth?: string;
  readonly callTimeout?: string;
  readonly logLevel?: string;
  readonly json?: boolean;
}

export interface StoreConfig {
  readonly store: string;
}

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

export function storeConfig(flags: CommonFlags, env: Env): StoreConfig {
  const store = pick(flags.store, env, 'ODUFLOW_STORE') ?? DEFAULT_FILE_STORE_ROOT;
  if (store.startsWith('postgres://') || store.startsWith('postgresql://')) {
    throw new MasterRunnerError('config_invalid', 'PostgreSQL stores are not available in this release; use a directory');
  }
  return { store };
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
