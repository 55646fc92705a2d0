import { ReceiptStoreError } from '@oduflow/receipt-store';

/**
 * The closed set of job-envelope error codes: add, never rename (the rollout
 * command and the service map them to exit statuses and problem types).
 */
export const JOB_ENVELOPE_ERROR_CODES = [
  /** The JobSpec or the stage list is malformed, or the stages do not match the spec's stage ids. */
  'invalid_spec',
  /** Another argument is malformed: a workspace that is not an absolute path, a run id that is not a canonical UUID, an option. */
  'invalid_argument',
  /** Another process holds this workspace's lock for this job type. */
  'job_locked',
  /** The named run does not exist in this workspace (or never committed its first checkpoint). */
  'run_not_found',
  /** A checkpoint is not a consistent ledger: bad shape, stage order, timestamps, error tuple, state, or a stored fingerprint that does not match its own fields. */
  'corrupt_checkpoint',
  /** The checkpoint is consistent, but it belongs to a different job than the one asked to resume (inputs, mode, versions, stages, workspace identity). */
  'resume_mismatch',
  /** The run was already taken over by a resume; resume its successor instead. */
  'run_superseded',
  /** The run already succeeded: there is nothing left to resume. */
  'run_finished',
  /** A stage tried to save a state outside the canonical JSON domain or over the size limit. */
  'invalid_stage_state',
  /** The summary hook returned something that is not a closed JobSummary. */
  'invalid_summary',
  /** A symlink, a second hard link, the wrong owner or mode somewhere in the workspace. */
  'unsafe_workspace',
  /** Any other file-system failure; `cause` holds the underlying error. */
  'io_error',
  /** The caller aborted the run (`options.signal`): nothing more was written; the run reads as interrupted and can be resumed. */
  'aborted',
] as const;

export type JobEnvelopeErrorCode = (typeof JOB_ENVELOPE_ERROR_CODES)[number];

const MARKER = Symbol.for('oduflow.job-envelope.error');

export function isJobEnvelopeErrorCode(value: unknown): value is JobEnvelopeErrorCode {
  return typeof value === 'string' && (JOB_ENVELOPE_ERROR_CODES as readonly string[]).includes(value);
}

/**
 * The one error type of `@oduflow/job-envelope`. Messages say what was wrong
 * in operator terms and never echo stage state, inputs or file contents.
 */
export class JobEnvelopeError extends Error {
  readonly [MARKER] = true;
  override readonly name = 'JobEnvelopeError';
  readonly code: JobEnvelopeErrorCode;

  constructor(code: JobEnvelopeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** True for a JobEnvelopeError from any copy of this package (duplicated installs included). */
  static isInstance(error: unknown): error is JobEnvelopeError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[MARKER] === true;
  }
}

/**
 * Maps a receipt-store failure to ours, keeping it as `cause`. Anything that
 * is not a store error is passed through untouched.
 */
export function fromStoreError(error: unknown, what: string): unknown {
  if (!ReceiptStoreError.isInstance(error)) return error;
  switch (error.code) {
    case 'unsafe_path':
      return new JobEnvelopeError('unsafe_workspace', `${what}: ${error.message}`, { cause: error });
    case 'lock_busy':
    case 'lock_timeout':
      return new JobEnvelopeError('job_locked', `${what}: another process holds the lock`, { cause: error });
    case 'malformed_json':
      return new JobEnvelopeError('corrupt_checkpoint', `${what}: ${error.message}`, { cause: error });
    case 'invalid_name':
      return new JobEnvelopeError('invalid_argument', `${what}: ${error.message}`, { cause: error });
    case 'not_found':
      return new JobEnvelopeError('run_not_found', `${what}: ${error.message}`, { cause: error });
    default:
      return new JobEnvelopeError('io_error', `${what}: ${error.message}`, { cause: error });
  }
}

/** Runs `action`, rethrowing a receipt-store failure as a JobEnvelopeError. */
export function store<T>(what: string, action: () => T): T {
  try {
    return action();
  } catch (error) {
    throw fromStoreError(error, what);
  }
}
