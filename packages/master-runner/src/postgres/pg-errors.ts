import { MasterRunnerError, type MasterRunnerErrorCode } from '../errors.js';

/*
 * Driver and server failures as MasterRunnerError. A PostgreSQL message may
 * quote the values of a statement ("invalid input syntax for type json: …",
 * a key in DETAIL), so neither the message, the detail nor the error itself
 * (as `cause`: log serializers print a cause's message) is ever kept: only
 * the SQLSTATE or the socket error code, and the name of our own constraint.
 */

/** pg-pool's error when every connection stayed busy for connectionTimeoutMillis. */
const POOL_EXHAUSTED = 'timeout exceeded when trying to connect';

const SQLSTATE = /^[0-9A-Z]{5}$/;
const ERRNO = /^E[A-Z0-9_]{2,30}$/;
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

interface DriverFields {
  readonly code?: unknown;
  readonly constraint?: unknown;
  readonly message?: unknown;
}

function fields(error: unknown): DriverFields {
  return typeof error === 'object' && error !== null ? error : {};
}

/** The SQLSTATE of a server error, if it is one. */
export function sqlStateOf(error: unknown): string | undefined {
  const { code } = fields(error);
  return typeof code === 'string' && SQLSTATE.test(code) ? code : undefined;
}

/** The name of the constraint a server error names (ours are plain identifiers). */
export function constraintOf(error: unknown): string | undefined {
  const { constraint } = fields(error);
  return typeof constraint === 'string' && IDENTIFIER.test(constraint) ? constraint : undefined;
}

function classify(state: string): { code: MasterRunnerErrorCode; why: string } {
  switch (state) {
    case '55P03':
      return { code: 'store_busy', why: 'another worker held a lock for longer than the lock timeout' };
    case '40P01':
      return { code: 'store_busy', why: 'PostgreSQL broke a deadlock by aborting this unit; retry it' };
    case '40001':
      return { code: 'store_busy', why: 'PostgreSQL aborted this unit after a concurrent update; retry it' };
    case '53300':
      return { code: 'store_busy', why: 'PostgreSQL has no free connection slot' };
    case '28P01':
    case '28000':
      return { code: 'store_io', why: 'PostgreSQL refused the user or password' };
    case '3D000':
      return { code: 'store_io', why: 'the database does not exist' };
    case '42501':
      return { code: 'store_io', why: 'the database user lacks a privilege the store needs' };
    case '42P01':
    case '42703':
    case '3F000':
      return { code: 'store_format', why: 'the oduflow schema lacks a table or column this release uses (was it changed by hand?)' };
    case '25P03':
      return { code: 'store_io', why: 'PostgreSQL ended a transaction that stayed idle too long' };
    case '25P02':
      return { code: 'store_io', why: 'the transaction was aborted by an earlier failure' };
  }
  if (state.startsWith('08') || state.startsWith('57P')) return { code: 'store_io', why: 'the connection to PostgreSQL was lost' };
  if (state.startsWith('53')) return { code: 'store_io', why: 'PostgreSQL ran out of a resource (disk, memory)' };
  if (state.startsWith('22')) return { code: 'store_io', why: 'PostgreSQL refused a value' };
  if (state.startsWith('23')) return { code: 'store_io', why: 'PostgreSQL refused a write that breaks a constraint' };
  return { code: 'store_io', why: 'PostgreSQL failed' };
}

/** Maps anything a pg call threw onto this package's codes; a MasterRunnerError is returned as it is. */
export function fromPgError(error: unknown, what: string): MasterRunnerError {
  if (MasterRunnerError.isInstance(error)) return error;
  const state = sqlStateOf(error);
  if (state !== undefined) {
    const { code, why } = classify(state);
    const constraint = constraintOf(error);
    const on = constraint === undefined ? '' : `, constraint ${constraint}`;
    return new MasterRunnerError(code, `${what}: ${why} (SQLSTATE ${state}${on})`);
  }
  const { code, message } = fields(error);
  if (message === POOL_EXHAUSTED) {
    return new MasterRunnerError('store_busy', `${what}: every connection of the pool stayed busy for longer than the lock timeout`);
  }
  if (typeof code === 'string' && ERRNO.test(code)) {
    return new MasterRunnerError('store_io', `${what}: cannot reach PostgreSQL (${code})`);
  }
  // pg's own messages ("Connection terminated unexpectedly", TLS refusals) name no values, but are not kept either.
  return new MasterRunnerError('store_io', `${what}: the PostgreSQL connection failed`);
}

/** An error of the caller's own code (a decide, a unit's work): passed on unchanged, never mapped. */
export class CallerError extends Error {
  constructor(readonly error: unknown) {
    super("the caller's own error, passed through a store call");
    this.name = 'CallerError';
  }
}

/** Runs `fn`, rethrowing driver failures as MasterRunnerError and the caller's own errors as they were. */
export async function pgCall<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof CallerError) throw error.error;
    throw fromPgError(error, what);
  }
}
