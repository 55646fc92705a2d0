import { z } from 'zod';
import { NINE_KEY_STATUSES, REFUSAL_REASONS } from './answers.js';
import { ReadinessReasonsSchema } from './capabilities.js';
import { ERROR_CODE_PATTERN } from './errors.js';

/*
 * The closed vocabulary of a master request record: why it is in its state
 * (`reason`) and what the minion last said about it (`last_observation`).
 * Every set is spelled out once here, so the CLI and the service match on
 * them with the compiler's help and a store refuses anything else.
 */

/** How a salt-api exchange failed (the master's Salt client classifies every failure as one of these). */
export const TRANSPORT_FAILURES = [
  'connection_refused',
  'host_not_found',
  'connect_timeout',
  'network_error',
  'timeout',
  'connection_reset',
  'http_error',
  'server_error',
  'malformed_response',
  'response_too_large',
  /** salt-api refused the login. */
  'auth_failed',
  /** salt-api answered 401 to a request that had been sent. */
  'unauthorized',
  /** salt-api answered a publication with `{}`: no accepted key matched. */
  'no_matching_minion',
  /** salt-api acknowledged a publication under another JID. */
  'jid_mismatch',
] as const;
export type TransportFailure = (typeof TRANSPORT_FAILURES)[number];

/** How a synchronous call (`local`) can end without an answer from the minion. */
export const CALL_FAILURES = [
  /** The minion is an accepted key but did not return within the timeout. */
  'no_return',
  /** No accepted minion key matched the target. */
  'no_target',
  ...TRANSPORT_FAILURES,
] as const;
export type CallFailure = (typeof CALL_FAILURES)[number];

/** Why a status poll gave nothing this record can use. */
export const POLL_FAILURES = [
  ...CALL_FAILURES,
  /** A Salt-level answer (module missing, `__virtual__` false, a traceback): not this protocol. */
  'not_a_protocol_answer',
  /** An object that is not a valid status answer. */
  'invalid_status_answer',
  /** An object that tries to be an error answer but is not one (e.g. a code of the wrong shape). */
  'invalid_error_answer',
  /** A valid status answer bound to another request, JID, profile or digest: the record is quarantined. */
  'answer_binding_conflict',
] as const;
export type PollFailure = (typeof POLL_FAILURES)[number];

/** What made a record `unknown`. */
export const UNKNOWN_CAUSES = [
  /**
   * `oduflow_job.status` answered `unknown`: the minion holds a claim (JID
   * index or running record) for this publication without a terminal receipt
   * and no live worker, or a receipt whose state result could not be reduced.
   * Either way the state may have run, wholly or in part.
   */
  'status_unknown',
  /** The same answer after the master had seen this request `running`: the state had started. */
  'status_unknown_after_running',
] as const;
export type UnknownCause = (typeof UNKNOWN_CAUSES)[number];

/** Where a binding conflict was found. */
export const CONFLICT_SOURCES = [
  /** The minion itself answered the error `binding_conflict`. */
  'minion',
  /** The minion answered a valid status bound to another request, JID, profile or digest. */
  'answer',
] as const;
export type ConflictSource = (typeof CONFLICT_SOURCES)[number];

/** An ISO 8601 UTC instant as `Date.prototype.toISOString` writes it. */
export const InstantSchema = z.iso.datetime();

export const RecordReasonSchema = z.discriminatedUnion('code', [
  /** The publish call failed after bytes may have left: published-uncertain, only ever polled. */
  z.strictObject({ code: z.literal('publish_uncertain'), failure: z.enum(TRANSPORT_FAILURES) }),
  /** The publish call provably sent nothing: back to prepared, with the same JID. */
  z.strictObject({ code: z.literal('publish_not_sent'), failure: z.enum(TRANSPORT_FAILURES) }),
  /** Dispatch: the minion answered, but not as oduflow_job (module missing or not loaded). */
  z.strictObject({ code: z.literal('capability_missing') }),
  /** Dispatch: the capabilities answer is not module 1.1.0's (an older module, or malformed). */
  z.strictObject({ code: z.literal('capability_unsupported') }),
  /** Dispatch: the minion answered that it cannot execute safely, for these reasons. */
  z.strictObject({ code: z.literal('not_ready'), readiness: ReadinessReasonsSchema.refine((r) => r.length > 0) }),
  /** Only in records written before module 1.1.0: the capability call failed in transport (today that creates no record). */
  z.strictObject({ code: z.literal('capability_unanswered'), failure: z.enum(CALL_FAILURES) }),
  /** The minion refused the publication and proved it never started and never will: rejected, target released. */
  z.strictObject({ code: z.literal('refused'), refusal: z.enum(REFUSAL_REASONS) }),
  /** A refusal after the minion had answered `running`: contradictory evidence, quarantined. */
  z.strictObject({ code: z.literal('refused_after_running'), refusal: z.enum(REFUSAL_REASONS) }),
  /** The latest poll gave nothing usable (the record keeps its state). */
  z.strictObject({ code: z.literal('poll_failed'), failure: z.enum(POLL_FAILURES) }),
  /** The minion answered an error (its code, possibly one this master does not know). */
  z.strictObject({ code: z.literal('minion_error'), error: z.string().regex(ERROR_CODE_PATTERN) }),
  /** Evidence bound to another request, JID, profile or digest: quarantined. */
  z.strictObject({ code: z.literal('binding_conflict'), source: z.enum(CONFLICT_SOURCES) }),
  /** The minion answered `unknown`; the cause says how. */
  z.strictObject({ code: z.literal('unknown'), cause: z.enum(UNKNOWN_CAUSES) }),
]);
export type RecordReason = z.infer<typeof RecordReasonSchema>;
export type RecordReasonCode = RecordReason['code'];

/** Every `reason.code`, in the order above (for tables and docs). */
export const RECORD_REASON_CODES = RecordReasonSchema.options.map((option) => option.shape.code.value) as readonly RecordReasonCode[];

/**
 * What the minion said at the latest poll: a status (with its refusal reason
 * when refused), an error code, or why nothing usable came back.
 */
export const ObservationSchema = z.union([
  z.strictObject({ status: z.enum(NINE_KEY_STATUSES), at: InstantSchema }),
  z.strictObject({ status: z.literal('refused'), reason: z.enum(REFUSAL_REASONS), at: InstantSchema }),
  z.strictObject({ error: z.string().regex(ERROR_CODE_PATTERN), at: InstantSchema }),
  z.strictObject({ failure: z.enum(POLL_FAILURES), at: InstantSchema }),
]);
export type Observation = z.infer<typeof ObservationSchema>;
