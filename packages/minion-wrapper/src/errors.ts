/**
 * The closed set of error codes of `@oduflow/minion-wrapper`. Messages name
 * what was wrong in operator terms and never echo the offending value.
 */
export const MINION_WRAPPER_ERROR_CODES = [
  'invalid_minion_id',
  'invalid_master_host',
  'invalid_path',
  'module_asset_unreadable',
  'module_version_missing',
  'invalid_sha256',
  'sls_template_invalid',
  'invalid_schedule',
] as const;

export type MinionWrapperErrorCode = (typeof MINION_WRAPPER_ERROR_CODES)[number];

const MARKER = Symbol.for('oduflow.minion-wrapper.error');

export class MinionWrapperError extends Error {
  readonly [MARKER] = true;
  readonly code: MinionWrapperErrorCode;

  /** True for a MinionWrapperError from any copy of this package. */
  static isInstance(error: unknown): error is MinionWrapperError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[MARKER] === true;
  }

  constructor(code: MinionWrapperErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MinionWrapperError';
    this.code = code;
  }
}
