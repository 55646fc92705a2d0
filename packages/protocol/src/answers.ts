import { z } from 'zod';
import { PROFILES, PROTOCOL_VERSION } from './constants.js';
import { ERROR_CODE_PATTERN, ProtocolError, type ProtocolErrorCode } from './errors.js';
import { isJid, isMinionId, isRequestId } from './identity.js';
import { isStateDigestFor } from './patterns.js';
import { schemaFailure } from './schema-failure.js';

/** Outcomes a receipt can prove. */
export const TERMINAL_STATUSES = ['succeeded', 'failed', 'unknown'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/**
 * Why a minion refused a publication it proves it never started and never
 * will (status `refused`). A closed set shared with `oduflow_job.py`; each is
 * also a protocol error code.
 */
export const REFUSAL_REASONS = [
  'execution_busy',
  'not_ready',
  'unsupported_runtime',
  'forbidden_option',
  'parallel_refused',
] as const satisfies readonly ProtocolErrorCode[];
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** Statuses whose answer has exactly the receipt's nine keys. */
export const NINE_KEY_STATUSES = ['not_started', 'running', ...TERMINAL_STATUSES] as const;

/**
 * What `oduflow_job.status` may answer: a terminal outcome, the request is not
 * (yet) there or still running, or the minion refused it (ten keys, with `reason`).
 */
export const ANSWER_STATUSES = [...NINE_KEY_STATUSES, 'refused'] as const;
export type AnswerStatus = (typeof ANSWER_STATUSES)[number];

/** The fields that tie an answer to exactly one request on one minion. */
export const BINDING_FIELDS = ['minion_id', 'request_id', 'jid', 'profile', 'state_digest'] as const;
export type BindingField = (typeof BINDING_FIELDS)[number];

/** An integer count; `z.number()` already refuses booleans, so Python's `True == 1` cannot pass. */
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

const answerFields = {
  protocol: z.literal(PROTOCOL_VERSION),
  minion_id: z.string().refine(isMinionId),
  request_id: z.string().refine(isRequestId),
  jid: z.string().refine(isJid),
  profile: z.enum(PROFILES),
  state_digest: z.string(),
  passed: count,
  total: count,
};

interface AnswerFacts {
  profile: (typeof PROFILES)[number];
  state_digest: string;
  status: AnswerStatus;
  passed: number;
  total: number;
}

function digestFitsProfile({ profile, state_digest }: AnswerFacts): boolean {
  return isStateDigestFor(profile, state_digest);
}

/** A verdict needs states to count; anything without a verdict counts nothing. */
function countsFitStatus({ status, passed, total }: AnswerFacts): boolean {
  switch (status) {
    case 'succeeded':
      return total > 0 && passed === total;
    case 'failed':
      return total > 0 && passed < total;
    default:
      return passed === 0 && total === 0;
  }
}

function checkAnswerRules(answer: AnswerFacts, ctx: z.RefinementCtx): void {
  if (!digestFitsProfile(answer)) {
    ctx.addIssue({ code: 'custom', path: ['state_digest'], message: 'state_digest does not fit the profile' });
  }
  if (!countsFitStatus(answer)) {
    ctx.addIssue({ code: 'custom', path: ['status'], message: 'passed/total do not fit the status' });
  }
}

/** The terminal receipt the minion commits and `run` returns: exactly these nine keys. */
export const ReceiptSchema = z
  .strictObject({ ...answerFields, status: z.enum(TERMINAL_STATUSES) })
  .superRefine(checkAnswerRules);
export type Receipt = z.infer<typeof ReceiptSchema>;

/**
 * What `status` answers: the receipt's nine keys, with `not_started` and
 * `running` (both 0/0) also allowed; or, for `refused` (0/0), those nine plus
 * `reason`. `reason` appears exactly when the status is `refused`.
 */
export const StatusAnswerSchema = z
  .discriminatedUnion('status', [
    z.strictObject({ ...answerFields, status: z.enum(NINE_KEY_STATUSES) }),
    z.strictObject({ ...answerFields, status: z.literal('refused'), reason: z.enum(REFUSAL_REASONS) }),
  ])
  .superRefine(checkAnswerRules);
export type StatusAnswer = z.infer<typeof StatusAnswerSchema>;
export type RefusedAnswer = Extract<StatusAnswer, { status: 'refused' }>;

/**
 * An error sent back as data (Salt retcode 1). `error` is any code of the
 * code shape: a newer module may send a code this master does not know yet,
 * and it must be recorded as sent (`isProtocolErrorCode` tells known ones).
 */
export const ErrorAnswerSchema = z.strictObject({
  protocol: z.literal(PROTOCOL_VERSION),
  error: z.string().regex(ERROR_CODE_PATTERN),
  message: z.string(),
});
export type ErrorAnswer = z.infer<typeof ErrorAnswerSchema>;

/** Any subset of the binding fields; each one given must equal the answer's field exactly. */
export type Binding = Partial<Pick<Receipt, BindingField>>;

function assertBinding(answer: Receipt | StatusAnswer, binding: Binding, subject: string): void {
  for (const key of Object.keys(binding)) {
    if (!(BINDING_FIELDS as readonly string[]).includes(key)) {
      // A misspelt binding key would otherwise silently bind nothing.
      throw new TypeError(`a binding may only name ${BINDING_FIELDS.join(', ')}`);
    }
  }
  for (const field of BINDING_FIELDS) {
    if (Object.hasOwn(binding, field) && binding[field] !== answer[field]) {
      throw new ProtocolError('binding_conflict', `${subject} is bound to a different ${field} than this request`);
    }
  }
}

/** Validates a receipt (schema first, then the optional binding); returns it or throws `invalid_receipt` / `binding_conflict`. */
export function parseReceipt(value: unknown, binding?: Binding): Receipt {
  const parsed = ReceiptSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_receipt', 'receipt', parsed.error);
  if (binding !== undefined) assertBinding(parsed.data, binding, 'receipt');
  return parsed.data;
}

/** Validates a status answer against the request it was asked about; throws `invalid_status_answer` / `binding_conflict`. */
export function parseStatusAnswer(value: unknown, binding: Binding): StatusAnswer {
  const parsed = StatusAnswerSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_status_answer', 'status answer', parsed.error);
  assertBinding(parsed.data, binding, 'status answer');
  return parsed.data;
}

/** Validates an error answer (`{protocol, error, message}` exactly, `error` of the code shape); else `invalid_error_answer`. */
export function parseErrorAnswer(value: unknown): ErrorAnswer {
  const parsed = ErrorAnswerSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_error_answer', 'error answer', parsed.error);
  return parsed.data;
}
