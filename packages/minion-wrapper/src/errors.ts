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
] as const;

export type MinionWrapperErrorCode = (typeof MINION_WRAPPER_ERROR_CODES)[number];

export class MinionWrapperError extends Error {
  readonly code: MinionWrapperErrorCode;

  constructor(code: MinionWrapperErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MinionWrapperError';
    this.code = code;
  }
}
