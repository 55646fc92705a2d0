import { MasterRunnerError } from '@oduflow/master-runner';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { keyProblemDetail } from './idempotency-key.js';
import { ProblemError } from './problems.js';

/*
 * Any error a route or a hook throws becomes one problem of the table. The
 * detail is built from codes and field paths only: a framework message may
 * quote the body (V8's JSON.parse does), and a 5xx never shows internals
 * (store paths, stack frames) to a tenant; the log has the code.
 */

/** State data the protocol refused: 422 with the protocol's code. */
const STATE_DATA_CODES: ReadonlySet<string> = new Set([
  'invalid_high_data',
  'high_data_too_large',
  'high_data_too_deep',
  'forbidden_key',
  'non_canonical_json',
  'unsupported_json_value',
]);

function fromRunner(error: MasterRunnerError): ProblemError {
  const reason = error.detail === undefined ? {} : { reason: error.detail };
  switch (error.code) {
    case 'invalid_input':
      if (error.detail !== undefined && STATE_DATA_CODES.has(error.detail)) return new ProblemError('invalid_state_data', error.message, reason);
      return new ProblemError('invalid_request', error.message, reason);
    case 'not_found':
      return new ProblemError('not_found', 'no such request');
    case 'illegal_transition':
      return new ProblemError('illegal_transition', error.message, reason);
    case 'target_blocked':
      return new ProblemError('target_blocked', 'the target has an unresolved request; poll it or have it reconciled first', reason);
    case 'minion_unreachable':
      return new ProblemError(
        'minion_unreachable',
        'the minion did not answer its capability call; nothing was recorded: send the same request again later',
        { ...reason, retryAfterS: 5 },
      );
    case 'no_target':
      return new ProblemError('no_target', 'Salt has no accepted key for this minion id; nothing was recorded');
    case 'store_busy':
      return new ProblemError('store_busy', 'the record store is busy; try again', { retryAfterS: 1 });
    default:
      return new ProblemError('internal', 'the service could not complete the request; its log has the cause');
  }
}

interface FastifyLikeError {
  readonly statusCode?: number;
  readonly code?: string;
  readonly validationContext?: string;
  readonly validation?: readonly { readonly instancePath?: string; readonly keyword?: string }[];
}

function validationDetail(error: FastifyLikeError): string {
  const where = error.validationContext ?? 'request';
  const issues = (error.validation ?? []).slice(0, 5).map((v) => `${where}${(v.instancePath ?? '').replaceAll('/', '.')} (${v.keyword ?? 'invalid'})`);
  return `invalid ${issues.join(', ')}`;
}

export function toProblem(error: unknown): ProblemError {
  if (ProblemError.isInstance(error)) return error;
  if (MasterRunnerError.isInstance(error)) return fromRunner(error);
  if (typeof error !== 'object' || error === null) return new ProblemError('internal', 'unexpected error');
  const e = error as FastifyLikeError;
  if (hasZodFastifySchemaValidationErrors(error)) {
    // The only header a route declares is Idempotency-Key.
    if (e.validationContext === 'headers') return new ProblemError('invalid_idempotency_key', keyProblemDetail('missing'), { reason: 'missing' });
    return new ProblemError('invalid_request', validationDetail(e));
  }
  if (error instanceof Error && 'method' in error && isResponseSerializationError(error)) {
    return new ProblemError('internal', 'the service could not complete the request; its log has the cause');
  }
  const status = e.statusCode ?? 500;
  if (status === 413) return new ProblemError('payload_too_large', 'the request body is larger than the service accepts');
  if (status === 415) return new ProblemError('unsupported_media_type', 'send the body as application/json');
  if (status >= 400 && status < 500) {
    // e.g. FST_ERR_CTP_INVALID_JSON_BODY: the code, never the parser's message (it quotes the body).
    return new ProblemError('invalid_request', `the request could not be read${e.code === undefined ? '' : ` (${e.code})`}`);
  }
  return new ProblemError('internal', 'the service could not complete the request; its log has the cause');
}

/** What the log may say about an error: its kind and code, never its message. */
export function errorLogFields(error: unknown): Record<string, unknown> {
  if (MasterRunnerError.isInstance(error)) return { err_type: error.name, code: error.code, detail: error.detail };
  if (ProblemError.isInstance(error)) return { err_type: error.name, code: error.code };
  const kind = error instanceof Error ? error.name : typeof error;
  const code = typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string' ? (error as { code: string }).code : undefined;
  const stack =
    error instanceof Error && typeof error.stack === 'string' ? error.stack.split('\n').filter((l) => /^\s+at /.test(l)).join('\n') : undefined;
  return { err_type: kind, code, stack };
}
