/**
 * The closed set of protocol error codes. The Python module (`oduflow_job.py`)
 * raises and returns exactly these codes, and the shared fixtures name them,
 * so a code is part of the wire contract: add, never rename.
 */
export const PROTOCOL_ERROR_CODES = [
  // identities and request fields
  'invalid_request_id',
  'invalid_minion_id',
  'invalid_jid',
  'invalid_profile',
  'invalid_state_digest',
  // canonical JSON and custom high data
  'non_canonical_json',
  'unsupported_json_value',
  'invalid_high_data',
  'high_data_too_large',
  'high_data_too_deep',
  'forbidden_key',
  // answers from the minion
  'invalid_receipt',
  'invalid_status_answer',
  'invalid_capabilities',
  'invalid_error_answer',
  'binding_conflict',
  // master request state machine
  'illegal_transition',
  // refusals the minion module sends back as error answers
  'forbidden_option',
  'execution_busy',
  'unsafe_store',
  'malformed_store',
  'unsupported_runtime',
  'internal_error',
  // appended: a publication whose request was already claimed is never executed again
  'already_claimed',
  // appended (module 1.1.0): the minion is not ready to execute (a refusal reason too)
  'not_ready',
  // appended (module 1.1.0): a fixed role compiles to a state with the parallel option
  'parallel_refused',
  // appended (module 1.1.0): a request record whose JID index is missing or bound differently
  'inconsistent_evidence',
] as const;

export type ProtocolErrorCode = (typeof PROTOCOL_ERROR_CODES)[number];

/**
 * What any error code looks like on the wire, including one from a newer
 * module that this master does not know yet: such a code is recorded as it
 * is, never folded into a generic failure. Anything else is not a code.
 */
export const ERROR_CODE_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;

export function isErrorCodeShape(value: unknown): value is string {
  return typeof value === 'string' && ERROR_CODE_PATTERN.test(value);
}

const MARKER = Symbol.for('oduflow.protocol.error');

export function isProtocolErrorCode(value: unknown): value is ProtocolErrorCode {
  return typeof value === 'string' && (PROTOCOL_ERROR_CODES as readonly string[]).includes(value);
}

/**
 * The one error type of `@oduflow/protocol`. Messages describe what was wrong
 * in operator terms and never echo the offending input (it may hold secrets).
 */
export class ProtocolError extends Error {
  readonly [MARKER] = true;
  override readonly name = 'ProtocolError';
  readonly code: ProtocolErrorCode;

  constructor(code: ProtocolErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** True for a ProtocolError from any copy of this package (duplicated installs included). */
  static isInstance(error: unknown): error is ProtocolError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[MARKER] === true;
  }
}
