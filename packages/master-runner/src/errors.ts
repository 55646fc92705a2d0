import type { JobEnvelopeErrorCode } from '@oduflow/job-envelope';
import type { CallFailure, ProtocolErrorCode, RequestState } from '@oduflow/protocol';
import type { ReceiptStoreErrorCode } from '@oduflow/receipt-store';

/**
 * The closed set of master-runner error codes. The CLI maps each to an exit
 * status in one table (apps/master), so a code is part of the operator
 * contract: add, never rename.
 */
export const MASTER_RUNNER_ERROR_CODES = [
  /** An id, profile, state data or option failed validation; `detail` names the protocol code. */
  'invalid_input',
  /** The target has an unresolved request; only an operator reconciliation unblocks it. */
  'target_blocked',
  /** A caller-chosen request id is already bound to another minion, profile or digest. */
  'request_conflict',
  /** No record with that request id. */
  'not_found',
  /** The request is in a state where the operation does not apply (e.g. reconciling a terminal result). */
  'illegal_transition',
  /** The store path is a symlink, has the wrong owner or mode, or holds unsafe entries. */
  'store_unsafe',
  /** A stored record or index is not what this runner writes. */
  'store_corrupt',
  /** A store lock was held by another worker for longer than the wait. */
  'store_busy',
  /** Any other store I/O failure. */
  'store_io',
  /**
   * The store's on-disk format is not the one this release opens: an older
   * layout (`detail` needs_migration: run `oduflow-master migrate-store` once)
   * or an unknown marker (`detail` unknown_format: left untouched).
   */
  'store_format',
  /** The salt-api password file is not private (mode, owner, symlink, not a regular file). */
  'credentials_insecure',
  /** The salt-api password file cannot be read or is empty. */
  'credentials_unreadable',
  /** Configuration is missing or malformed (URL, eauth, timeouts). */
  'config_invalid',
  /** A bug or an impossible state: never expected in operation. */
  'internal',
  /**
   * The minion's capability call got no answer (transport failure, timeout,
   * no return; `detail` says which): nothing was recorded or published, and
   * the same request id may be dispatched again.
   */
  'minion_unreachable',
  /**
   * No accepted minion key matched the target (unknown, or its key not yet
   * accepted): nothing was recorded or published, and the same request id may
   * be dispatched again once the key is accepted.
   */
  'no_target',
  /**
   * The rollout workspace refused the operation (`detail`: the job-envelope
   * code: `job_locked`, `run_not_found`, `resume_mismatch`,
   * `corrupt_checkpoint`, `run_superseded`, `run_finished`,
   * `unsafe_workspace`, `invalid_argument`). Nothing was dispatched.
   */
  'rollout_refused',
  /** The rollout workspace could not be read or written (`detail` io_error); the last checkpoint stays, resume from it. */
  'rollout_io',
  /**
   * The rollout was stopped by its caller (RolloutOptions.signal: a service
   * shutting down) before its end. Nothing more was written: the run reads
   * `interrupted`, and a resume continues it without dispatching anything twice.
   */
  'rollout_interrupted',
] as const;

export type MasterRunnerErrorCode = (typeof MASTER_RUNNER_ERROR_CODES)[number];

/**
 * Finer details of this package's own, beside the codes it passes on from
 * @oduflow/protocol and @oduflow/receipt-store and the record states it names.
 * Add, never rename: operators and scripts match on them.
 */
export const MASTER_RUNNER_DETAILS = [
  /** The store directory does not exist or holds no store (read-only commands). */
  'no_store',
  /** A reconciliation reason is empty, too long or has control characters. */
  'invalid_reason',
  /** A reconciliation actor is not a user name. */
  'invalid_actor',
  /** ODUFLOW_LOG_LEVEL is not a level. */
  'invalid_log_level',
  /** A `poll --watch` interval is not a whole number of milliseconds, or too short. */
  'invalid_interval',
  /** A `poll --watch` timeout is not a whole number of milliseconds. */
  'invalid_timeout',
  /** An expected module digest is not 64 lowercase hex digits. */
  'invalid_expected_sha256',
  /** The reviewed module (its digest) could not be read from @oduflow/minion-wrapper. */
  'module_asset_unreadable',
  /** A rollout was given no target. */
  'no_targets',
  /** A rollout was given more targets than it can track (MAX_ROLLOUT_TARGETS). */
  'too_many_targets',
  /** A rollout batch size is not a whole number in range, or makes too many stages. */
  'invalid_batch_size',
  /** A rollout's max-unresolved budget is not a whole number of targets. */
  'invalid_budget',
  /** A rollout option (stage timeout, poll interval, concurrency, workspace) is malformed. */
  'invalid_rollout_option',
  /** store_format: the store predates the format marker; run `oduflow-master migrate-store` once. */
  'needs_migration',
  /** store_format: the store's format marker names a version this release does not know. */
  'unknown_format',
  /** An Idempotency-Key or its scope (tenant, actor, action) is not one an admission accepts, or a stored key's hash/fingerprint is not SHA-256 hex. */
  'invalid_admission_key',
  /** An admission was given a request id: it chooses its own (one per key claim). */
  'request_id_not_accepted',
  /** A list page's `after` is not a string or its `limit` not a positive integer. */
  'invalid_page',
] as const;

/**
 * What `MasterRunnerError.detail` may be: a closed union, so the CLI (and
 * the service) match on it with the compiler's help.
 */
export type MasterRunnerErrorDetail =
  | ProtocolErrorCode
  | ReceiptStoreErrorCode
  | RequestState
  | CallFailure
  | JobEnvelopeErrorCode
  | (typeof MASTER_RUNNER_DETAILS)[number];

const MARKER = Symbol.for('oduflow.master-runner.error');

export interface MasterRunnerErrorOptions {
  cause?: unknown;
  /** A finer, stable code: a protocol or receipt-store code, a record state, or one of MASTER_RUNNER_DETAILS. */
  detail?: MasterRunnerErrorDetail;
  /** The request the error is about, when there is one (safe to show). */
  requestId?: string;
}

/**
 * The one error type of `@oduflow/master-runner`. Messages say what was wrong
 * in operator terms; they never carry state data, tokens or passwords.
 */
export class MasterRunnerError extends Error {
  readonly [MARKER] = true;
  override readonly name = 'MasterRunnerError';
  readonly code: MasterRunnerErrorCode;
  readonly detail: MasterRunnerErrorDetail | undefined;
  readonly requestId: string | undefined;

  constructor(code: MasterRunnerErrorCode, message: string, options: MasterRunnerErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.detail = options.detail;
    this.requestId = options.requestId;
  }

  /** True for a MasterRunnerError from any copy of this package. */
  static isInstance(error: unknown): error is MasterRunnerError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[MARKER] === true;
  }
}

export function isMasterRunnerErrorCode(value: unknown): value is MasterRunnerErrorCode {
  return typeof value === 'string' && (MASTER_RUNNER_ERROR_CODES as readonly string[]).includes(value);
}
