/**
 * The closed set of receipt-store error codes: add, never rename (callers and
 * the master runner map them to their own codes and exit statuses).
 */
export const RECEIPT_STORE_ERROR_CODES = [
  /** A path or entry is not what a private store may contain: a symlink, a hard link, a non-directory, the wrong owner or mode. */
  'unsafe_path',
  /** The named entry does not exist. */
  'not_found',
  /** A no-replace write found the name already taken. */
  'already_exists',
  /** A non-blocking lock is held by someone else. */
  'lock_busy',
  /** A blocking lock was still held by someone else when the wait ran out. */
  'lock_timeout',
  /** A file held bytes that are not JSON. */
  'malformed_json',
  /** A name or path argument is malformed (not one component, NUL, '.', '..', reserved prefix, relative path). */
  'invalid_name',
  /** Any other system error; `cause` holds the original error with `code`, `errno` and `syscall`. */
  'io_error',
] as const;

export type ReceiptStoreErrorCode = (typeof RECEIPT_STORE_ERROR_CODES)[number];

const MARKER = Symbol.for('oduflow.receipt-store.error');

export function isReceiptStoreErrorCode(value: unknown): value is ReceiptStoreErrorCode {
  return typeof value === 'string' && (RECEIPT_STORE_ERROR_CODES as readonly string[]).includes(value);
}

/**
 * The one error type of `@oduflow/receipt-store`. Messages name the path and
 * what was wrong with it; they never echo file contents.
 */
export class ReceiptStoreError extends Error {
  readonly [MARKER] = true;
  override readonly name = 'ReceiptStoreError';
  readonly code: ReceiptStoreErrorCode;

  constructor(code: ReceiptStoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** True for a ReceiptStoreError from any copy of this package (duplicated installs included). */
  static isInstance(error: unknown): error is ReceiptStoreError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[MARKER] === true;
  }
}

/** The `code` of a Node or addon system error ('ENOENT', 'ELOOP', ...), if any. */
export function systemErrorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** Wraps a system error as io_error, keeping the original as `cause`. */
export function ioError(what: string, error: unknown): ReceiptStoreError {
  const code = systemErrorCode(error) ?? 'unknown error';
  return new ReceiptStoreError('io_error', `${what}: ${code}`, { cause: error });
}
