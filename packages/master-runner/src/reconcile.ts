import type { RequestRecord } from '@oduflow/protocol';
import { commitEvent, nowIso } from './commit.js';
import { resolveDeps, type MasterDeps } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { isRecordId } from './record-id.js';

/*
 * The operator's way out of an unresolved request (publishing, published,
 * running, unknown, quarantined, legacy) or a prepared one they decide not to
 * publish. It records who decided and why, unblocks the target, and never
 * publishes or re-applies anything: what happened on the minion is for the
 * operator to establish.
 */

export interface ReconcileInput {
  readonly reason: string;
  readonly actor: string;
}

const MAX_REASON_LENGTH = 1000;
const ACTOR = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/;
// Control characters would let a reason forge extra lines in logs and tables.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

function validate(input: ReconcileInput): ReconcileInput {
  const reason = typeof input.reason === 'string' ? input.reason.trim() : '';
  if (reason === '' || reason.length > MAX_REASON_LENGTH || CONTROL.test(reason)) {
    throw new MasterRunnerError('invalid_input', `a reconciliation needs a reason of 1-${MAX_REASON_LENGTH} printable characters`, {
      detail: 'invalid_reason',
    });
  }
  if (typeof input.actor !== 'string' || !ACTOR.test(input.actor)) {
    throw new MasterRunnerError('invalid_input', 'the actor must be a user name (letters, digits, . _ @ + -)', { detail: 'invalid_actor' });
  }
  return { reason, actor: input.actor };
}

export async function reconcile(deps: MasterDeps, requestId: string, input: ReconcileInput): Promise<RequestRecord> {
  const d = resolveDeps(deps);
  if (!isRecordId(requestId)) throw new MasterRunnerError('invalid_input', 'not a request id', { detail: 'invalid_request_id' });
  const { reason, actor } = validate(input);
  const { after } = await commitEvent(d, requestId, { type: 'reconciled', at: nowIso(d), reason, actor }, { source: 'reconcile' });
  return after;
}
