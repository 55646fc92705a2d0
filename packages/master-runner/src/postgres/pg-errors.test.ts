import { describe, expect, it } from 'vitest';
import { MasterRunnerError } from '../errors.js';
import { CallerError, fromPgError, pgCall } from './pg-errors.js';

/** A server error as node-postgres reports it: the message and detail may quote statement values. */
function serverError(code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error('invalid input syntax for type json: "{\\"token\\":\\"s3cr3t\\"}"'), {
    code,
    detail: 'Key (jid)=(20261129100000000001) already exists.',
    ...extra,
  });
}

describe('PostgreSQL failures as MasterRunnerError', () => {
  it('maps a lock timeout, a deadlock, a serialization failure and a full server to store_busy', () => {
    for (const code of ['55P03', '40P01', '40001', '53300']) expect(fromPgError(serverError(code), 'locking').code).toBe('store_busy');
  });

  it('maps a missing table or schema to store_format, and lost connections and the rest to store_io', () => {
    for (const code of ['42P01', '42703', '3F000']) expect(fromPgError(serverError(code), 'reading').code).toBe('store_format');
    for (const code of ['08006', '57P01', '28P01', '3D000', '22P02', '23505', 'XX000']) expect(fromPgError(serverError(code), 'reading').code).toBe('store_io');
    expect(fromPgError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), 'opening').message).toContain('ECONNREFUSED');
  });

  it('maps a pool that stayed full to store_busy', () => {
    expect(fromPgError(new Error('timeout exceeded when trying to connect'), 'reading').code).toBe('store_busy');
  });

  it('never keeps the server message, its detail or the driver error itself', () => {
    const mapped = fromPgError(serverError('22P02', { constraint: 'requests_record_matches' }), 'writing a record');
    expect(mapped.message).toBe('writing a record: PostgreSQL refused a value (SQLSTATE 22P02, constraint requests_record_matches)');
    expect(mapped.cause).toBeUndefined();
    expect(JSON.stringify(mapped)).not.toContain('s3cr3t');
    // A constraint name that is not a plain identifier is not echoed either.
    expect(fromPgError(serverError('23505', { constraint: 'x"); DROP' }), 'w').message).not.toContain('DROP');
    expect(fromPgError(new Error('password authentication failed for "s3cr3t"'), 'opening').message).not.toContain('s3cr3t');
  });

  it("passes the store's own errors and the caller's errors through unchanged", async () => {
    const own = new MasterRunnerError('not_found', 'no record with that request id');
    expect(fromPgError(own, 'reading')).toBe(own);
    const callers = new Error('decided against it');
    await expect(pgCall('updating', () => Promise.reject(new CallerError(callers)))).rejects.toBe(callers);
    await expect(pgCall('updating', () => Promise.reject(serverError('55P03')))).rejects.toMatchObject({ code: 'store_busy' });
  });
});
