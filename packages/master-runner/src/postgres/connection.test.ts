import { describe, expect, it } from 'vitest';
import { MasterRunnerError } from '../errors.js';
import { DEFAULT_LOCK_TIMEOUT_MS, DEFAULT_POOL_SIZE, redactedLocation, resolveConnection } from './connection.js';

function codeOf(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return { code: error.code, message: error.message };
    throw error;
  }
  throw new Error('expected a MasterRunnerError');
}

describe('the PostgreSQL connection settings', () => {
  it('shows the URL without its password or any parameter that could hold a secret', () => {
    expect(redactedLocation(new URL('postgres://oduflow:s3cr3t@db.example:5433/oduflow'))).toBe('postgres://oduflow@db.example:5433/oduflow');
    expect(redactedLocation(new URL('postgresql://db.example/oduflow?sslmode=verify-full&password=s3cr3t&sslkey=/k&application_name=m1'))).toBe(
      'postgresql://db.example/oduflow?sslmode=verify-full&application_name=m1',
    );
  });

  it('bounds lock waits, pool waits and idle transactions by the lock timeout, and keeps durability at the server default', () => {
    const resolved = resolveConnection({ connectionString: 'postgres://oduflow:pw@127.0.0.1:5432/oduflow' });
    expect(resolved.location).toBe('postgres://oduflow@127.0.0.1:5432/oduflow');
    expect(resolved.pool).toMatchObject({
      max: DEFAULT_POOL_SIZE,
      lock_timeout: DEFAULT_LOCK_TIMEOUT_MS,
      connectionTimeoutMillis: DEFAULT_LOCK_TIMEOUT_MS,
      idle_in_transaction_session_timeout: 2 * DEFAULT_LOCK_TIMEOUT_MS,
      password: 'pw',
      host: '127.0.0.1',
      database: 'oduflow',
    });
    // synchronous_commit is never lowered: a commit the store reports is on disk.
    expect(JSON.stringify(resolved.pool)).not.toContain('synchronous_commit');
    expect(resolveConnection({ connectionString: 'postgres://h/db', poolSize: 3, lockTimeoutMs: 500 }).pool).toMatchObject({ max: 3, lock_timeout: 500 });
  });

  it('refuses a connection string that is not a postgres URL, without quoting it', () => {
    for (const connectionString of ['oduflow:s3cr3t@db/x', 'mysql://u:s3cr3t@db/x', 'http://u:s3cr3t@db/x']) {
      const refused = codeOf(() => resolveConnection({ connectionString }));
      expect(refused.code).toBe('config_invalid');
      expect(refused.message).not.toContain('s3cr3t');
    }
  });

  it('refuses a pool size or lock timeout that is not a positive whole number', () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(codeOf(() => resolveConnection({ connectionString: 'postgres://h/db', poolSize: bad })).code).toBe('config_invalid');
      expect(codeOf(() => resolveConnection({ connectionString: 'postgres://h/db', lockTimeoutMs: bad })).code).toBe('config_invalid');
    }
  });

  it('refuses a password in the URL and a password file at once', () => {
    for (const connectionString of ['postgres://u:pw@h/db', 'postgres://u@h/db?password=pw']) {
      const refused = codeOf(() => resolveConnection({ connectionString, passwordFile: '/nonexistent/password' }));
      expect(refused.code).toBe('config_invalid');
      expect(refused.message).not.toContain('pw@');
    }
  });
});
