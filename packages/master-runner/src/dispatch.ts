import { isProtocolRecord, type CapabilityRejection, type HistorySource, type RequestRecord } from '@oduflow/protocol';
import { checkCapability } from './capability.js';
import { resolveDeps, type MasterDeps } from './deps.js';
import { validateDispatchInput, type DispatchInput, type ValidDispatch } from './dispatch-input.js';
import { MasterRunnerError } from './errors.js';
import { publishPrepared, type PublishResult } from './publish.js';
import { notAsked, refuseIfTargetBlocked, reserve } from './reserve.js';

export type DispatchResult =
  | PublishResult
  /** The minion answered without proving it can execute: recorded as `rejected`, nothing published. */
  | { readonly outcome: 'rejected'; readonly record: RequestRecord; readonly rejection: CapabilityRejection }
  /** The caller's request id already exists with the same binding: nothing was done again. */
  | { readonly outcome: 'existing'; readonly record: RequestRecord };

function sameBinding(record: RequestRecord, input: ValidDispatch): boolean {
  return (
    isProtocolRecord(record) &&
    record.minion_id === input.minionId &&
    record.profile === input.profile &&
    record.state_digest === input.stateDigest
  );
}

function existingOrConflict(record: RequestRecord, input: ValidDispatch): DispatchResult {
  if (!sameBinding(record, input)) {
    throw new MasterRunnerError('request_conflict', 'this request id is already bound to another minion, profile or state data', {
      requestId: input.requestId,
    });
  }
  return { outcome: 'existing', record };
}

/**
 * Dispatches one managed apply (DESIGN §5): validate; refuse a blocked target;
 * verify the minion's capability (no answer → nothing recorded; an answer
 * that is not ready → `rejected`, nothing published); persist the record with
 * a JID unique in the store; persist the publish intent; publish once; record
 * the acknowledgement.
 *
 * Every outcome that left a record is a result (and carries it). What left
 * none throws MasterRunnerError: refusals (`invalid_input`, `target_blocked`,
 * `request_conflict`), a capability call that got no answer
 * (`minion_unreachable`) or found no accepted key (`no_target`), and store
 * failures.
 */
export interface DispatchOptions {
  /** Who dispatches, for the request's history: the CLI (default) or a rollout. */
  readonly source?: Extract<HistorySource, 'dispatch' | 'rollout'>;
}

export async function dispatch(deps: MasterDeps, input: DispatchInput, options: DispatchOptions = {}): Promise<DispatchResult> {
  const source = options.source ?? 'dispatch';
  const d = resolveDeps(deps);
  const valid = validateDispatchInput(input, d.newRequestId);
  const log = d.logger.child({ request_id: valid.requestId, minion_id: valid.minionId });

  const known = await d.store.get(valid.requestId);
  if (known !== undefined) return existingOrConflict(known, valid);

  await refuseIfTargetBlocked(d, valid.minionId);

  const capability = await checkCapability(d, valid.minionId);
  if (capability.kind === 'unreachable' || capability.kind === 'no_target') {
    log.warn({ capability: capability.kind, failure: capability.kind === 'unreachable' ? capability.failure : null }, 'capability call got no answer; nothing recorded');
    throw notAsked(capability, valid.requestId);
  }

  const reserved = await reserve(d, valid, capability.kind === 'rejected' ? capability.rejection : undefined, { source });
  if (reserved.kind === 'existing') return existingOrConflict(reserved.record, valid);
  if (reserved.kind === 'claim_lost') throw new MasterRunnerError('internal', 'a create without a key reported a lost key claim');
  const created = reserved.record;

  log.info({ jid: created.jid, state: created.state }, 'request recorded');
  if (capability.kind === 'rejected') return { outcome: 'rejected', record: created, rejection: capability.rejection };
  d.crashAt('P1');
  return publishPrepared(d, created, valid.stateDataJson, source);
}
