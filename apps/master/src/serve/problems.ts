import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';

/*
 * Every error the service answers is an RFC 9457 problem
 * (application/problem+json) whose `type` names one code of this table. The
 * table is the contract: add a code, never rename one. A `detail` says what
 * was wrong in operator terms and never echoes the request body (state data
 * is root on the minion) or a credential.
 */

const PROBLEM_BASE = 'https://oduflow.dev/problems/';
const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export const PROBLEMS = {
  invalid_request: { status: 400, title: 'The request is malformed' },
  invalid_idempotency_key: { status: 400, title: 'The Idempotency-Key header is missing or malformed' },
  unauthorized: { status: 401, title: 'A valid bearer token is required' },
  forbidden: { status: 403, title: 'The token lacks a scope this operation needs' },
  target_not_owned: { status: 403, title: 'The target is not one of the tenant’s' },
  not_found: { status: 404, title: 'No such resource' },
  target_blocked: { status: 409, title: 'The target has an unresolved request' },
  key_in_flight: { status: 409, title: 'An admission with this Idempotency-Key is still in flight' },
  illegal_transition: { status: 409, title: 'The request is in a state where this operation does not apply' },
  payload_too_large: { status: 413, title: 'The request body is too large' },
  unsupported_media_type: { status: 415, title: 'The request body must be application/json' },
  key_mismatch: { status: 422, title: 'This Idempotency-Key was used for other content' },
  invalid_state_data: { status: 422, title: 'The state data is not valid high data' },
  no_target: { status: 422, title: 'No accepted minion key matches the target' },
  internal: { status: 500, title: 'Internal error' },
  minion_unreachable: { status: 503, title: 'The minion did not answer; nothing was recorded' },
  store_busy: { status: 503, title: 'The record store is busy' },
  unavailable: { status: 503, title: 'The service is not ready or is shutting down' },
} as const satisfies Record<string, { readonly status: number; readonly title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;
export const PROBLEM_CODES = Object.keys(PROBLEMS) as ProblemCode[];

/** The problem body. Extension members: `code` (the table's), and at most the fields below. */
export const ProblemSchema = z
  .object({
    type: z.string().describe(`${PROBLEM_BASE}<code>`),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string().describe('urn:uuid:<id of this HTTP exchange>, as in the access log (http_id)'),
    code: z.enum(PROBLEM_CODES as [ProblemCode, ...ProblemCode[]]),
    /** A finer code: the protocol's for invalid state data, the failure for an unreachable minion, the state for a blocked target. */
    reason: z.string().optional(),
    /** target_blocked: the blocking request, when the tenant may see it. */
    blocking_request_id: z.string().optional(),
    /** forbidden: the scope that was missing. */
    required_scope: z.string().optional(),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details' });

type Problem = z.infer<typeof ProblemSchema>;

export interface ProblemExtras {
  readonly reason?: string;
  readonly blocking_request_id?: string;
  readonly required_scope?: string;
  /** Seconds, for 503 and 409 key_in_flight. */
  readonly retryAfterS?: number;
}

/** Thrown by handlers and hooks; the error handler turns it into the problem response. */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  readonly code: ProblemCode;
  readonly extras: ProblemExtras;

  constructor(code: ProblemCode, detail: string, extras: ProblemExtras = {}) {
    super(detail);
    this.code = code;
    this.extras = extras;
  }

  static isInstance(error: unknown): error is ProblemError {
    return error instanceof ProblemError;
  }
}

function problemBody(code: ProblemCode, detail: string, instance: string, extras: ProblemExtras = {}): Problem {
  const { status, title } = PROBLEMS[code];
  const { retryAfterS: _retryAfterS, ...fields } = extras;
  return { type: `${PROBLEM_BASE}${code}`, title, status, detail, instance, code, ...fields };
}

function instanceOf(request: FastifyRequest): string {
  return `urn:uuid:${request.id}`;
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, error: ProblemError): FastifyReply {
  const body = problemBody(error.code, error.message, instanceOf(request), error.extras);
  reply.code(body.status).header('content-type', PROBLEM_CONTENT_TYPE);
  if (error.extras.retryAfterS !== undefined) reply.header('retry-after', String(error.extras.retryAfterS));
  if (error.code === 'unauthorized') reply.header('www-authenticate', 'Bearer realm="oduflow"');
  return reply.send(body);
}

/** The OpenAPI response entries of the problems a route may answer. */
export function problemResponses(...codes: readonly ProblemCode[]): Record<number, { description: string; content: Record<string, { schema: typeof ProblemSchema }> }> {
  const out: Record<number, { description: string; content: Record<string, { schema: typeof ProblemSchema }> }> = {};
  for (const code of [...codes, 'internal' as const]) {
    const { status } = PROBLEMS[code];
    const listed = out[status]?.description;
    out[status] = {
      description: listed === undefined ? code : `${listed}, ${code}`,
      content: { [PROBLEM_CONTENT_TYPE]: { schema: ProblemSchema } },
    };
  }
  return out;
}
