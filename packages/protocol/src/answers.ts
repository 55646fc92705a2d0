import { z } from 'zod';
import { CAPABILITY, PROFILES, PROTOCOL_VERSION } from './constants.js';
import { PROTOCOL_ERROR_CODES, ProtocolError, type ProtocolErrorCode } from './errors.js';
import { isJid, isMinionId, isRequestId } from './identity.js';
import { SEMVER_PATTERN, isStateDigestFor } from './patterns.js';

/** Outcomes a receipt can prove. */
export const TERMINAL_STATUSES = ['succeeded', 'failed', 'unknown'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** What `oduflow_job.status` may answer: a terminal outcome, or the request is not (yet) there / still running. */
export const ANSWER_STATUSES = ['not_started', 'running', ...TERMINAL_STATUSES] as const;
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

/** What `status` answers: the receipt's nine keys, with `not_started` and `running` (both 0/0) also allowed. */
export const StatusAnswerSchema = z
  .strictObject({ ...answerFields, status: z.enum(ANSWER_STATUSES) })
  .superRefine(checkAnswerRules);
export type StatusAnswer = z.infer<typeof StatusAnswerSchema>;

/** What `oduflow_job.capabilities` answers. */
export const CapabilitiesSchema = z.strictObject({
  protocol: z.literal(PROTOCOL_VERSION),
  module_version: z.string().regex(SEMVER_PATTERN),
  salt_version: z.string(),
});
export type Capabilities = z.infer<typeof CapabilitiesSchema>;

/** A refusal sent back as data (Salt retcode 1). */
export const ErrorAnswerSchema = z.strictObject({
  protocol: z.literal(PROTOCOL_VERSION),
  error: z.enum(PROTOCOL_ERROR_CODES),
  message: z.string(),
});
export type ErrorAnswer = z.infer<typeof ErrorAnswerSchema>;

/** Any subset of the binding fields; each one given must equal the answer's field exactly. */
export type Binding = Partial<Pick<Receipt, BindingField>>;

/**
 * Turns a zod failure into a ProtocolError that names only a field of ours.
 * zod issues carry the input (and unknown keys by name), which may hold
 * secrets, so neither the issue messages nor the error itself are passed on.
 */
function schemaFailure(code: ProtocolErrorCode, subject: string, error: z.ZodError): ProtocolError {
  const issue = error.issues[0];
  if (issue === undefined) return new ProtocolError(code, `${subject} is invalid`);
  if (issue.code === 'unrecognized_keys') return new ProtocolError(code, `${subject} has fields outside the protocol`);
  if (issue.path.length === 0) return new ProtocolError(code, `${subject} must be an object`);
  return new ProtocolError(code, `${subject} field "${issue.path.map(String).join('.')}" is missing or invalid`);
}

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

/** Validates a capabilities answer and that it reports this protocol on the pinned Salt; else `invalid_capabilities`. */
export function parseCapabilities(value: unknown): Capabilities {
  const parsed = CapabilitiesSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_capabilities', 'capabilities answer', parsed.error);
  if (parsed.data.protocol !== CAPABILITY.protocol) {
    throw new ProtocolError('invalid_capabilities', `minion does not speak protocol ${CAPABILITY.protocol}`);
  }
  if (parsed.data.salt_version !== CAPABILITY.salt_version) {
    throw new ProtocolError('invalid_capabilities', `minion does not run the pinned Salt ${CAPABILITY.salt_version}`);
  }
  return parsed.data;
}

/** Validates an error answer (`{protocol, error, message}` exactly); else `invalid_error_answer`. */
export function parseErrorAnswer(value: unknown): ErrorAnswer {
  const parsed = ErrorAnswerSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('invalid_error_answer', 'error answer', parsed.error);
  return parsed.data;
}
