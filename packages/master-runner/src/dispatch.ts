import {
  applyEvent,
  capabilityFailed,
  createRequestRecord,
  isProtocolRecord,
  type CapabilityRejection,
  type ProtocolRequestRecord,
  type RequestRecord,
} from '@oduflow/protocol';
import { checkCapability, type CapabilityCheck } from './capability.js';
import { nowIso } from './commit.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { validateDispatchInput, type DispatchInput, type ValidDispatch } from './dispatch-input.js';
import { MasterRunnerError } from './errors.js';
import { jidForInstant, nextJid } from './jid.js';
import { publishPrepared, type PublishResult } from './publish.js';
import type { TargetUnit } from './record-store.js';

export type DispatchResult =
  | PublishResult
  /** The minion answered without proving it can execute: recorded as `rejected`, nothing published. */
  | { readonly outcome: 'rejected'; readonly record: RequestRecord; readonly rejection: CapabilityRejection }
  /** The caller's request id already exists with the same binding: nothing was done again. */
  | { readonly outcome: 'existing'; readonly record: RequestRecord };

/** How many consecutive JIDs are tried before giving up (each taken one is a microsecond later). */
const MAX_JID_BUMPS = 10_000;

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

/** What an operator does about the first blocker: a prepared request was never published. */
function blockedMessage(blocker: RequestRecord): string {
  const what = `target has an unresolved request (${blocker.request_id}, ${blocker.state})`;
  return blocker.state === 'prepared'
    ? `${what} that was never published; publish it with publish-pending, or cancel it with reconcile`
    : `${what}; poll it or reconcile it first`;
}

function refuseIfBlocked(blockers: readonly RequestRecord[]): void {
  const first = blockers[0];
  if (first === undefined) return;
  throw new MasterRunnerError('target_blocked', blockedMessage(first), { requestId: first.request_id, detail: first.state });
}

type Reserved = { readonly record: ProtocolRequestRecord } | { readonly existing: DispatchResult };

/** Creates the record under the target lock with the first free JID at or after the clock's. */
async function createWithUniqueJid(deps: ResolvedDeps, unit: TargetUnit, build: (jid: string) => ProtocolRequestRecord, input: ValidDispatch): Promise<Reserved> {
  let jid = jidForInstant(deps.now());
  for (let bump = 0; bump < MAX_JID_BUMPS; bump += 1) {
    const created = await unit.create(build(jid));
    if (created.created) return { record: created.record };
    if (created.reason === 'request_exists') return { existing: existingOrConflict(created.existing, input) };
    jid = nextJid(jid);
  }
  throw new MasterRunnerError('internal', 'no free JID found near the current time');
}

/** Under the target lock: the request id first, then the blockers, then the record with its JID. */
function reserve(d: ResolvedDeps, valid: ValidDispatch, rejection: CapabilityRejection | undefined): Promise<Reserved> {
  return d.store.withTarget(valid.minionId, async (unit): Promise<Reserved> => {
    // The request id first: a concurrent dispatch of the same request must
    // see its own record as `existing`, not as a blocker of the target.
    const raced = await d.store.get(valid.requestId);
    if (raced !== undefined) return { existing: existingOrConflict(raced, valid) };
    refuseIfBlocked(await unit.blockers());
    const at = nowIso(d);
    const build = (jid: string): ProtocolRequestRecord => {
      const prepared = createRequestRecord({
        request_id: valid.requestId,
        minion_id: valid.minionId,
        profile: valid.profile,
        state_digest: valid.stateDigest,
        jid,
        at,
      });
      return rejection === undefined ? prepared : (applyEvent(prepared, capabilityFailed(at, rejection)) as ProtocolRequestRecord);
    };
    return createWithUniqueJid(d, unit, build, valid);
  });
}

/**
 * A capability call that proved nothing about the minion leaves no record:
 * recording it would burn a request id over a transient fault (an
 * Idempotency-Key retry must be able to succeed later).
 */
function notAsked(check: Extract<CapabilityCheck, { kind: 'unreachable' | 'no_target' }>, valid: ValidDispatch): MasterRunnerError {
  if (check.kind === 'no_target') {
    return new MasterRunnerError('no_target', 'no accepted minion key matches this minion id; nothing was recorded', { requestId: valid.requestId });
  }
  return new MasterRunnerError('minion_unreachable', 'the minion did not answer its capability call; nothing was recorded, retry later', {
    requestId: valid.requestId,
    detail: check.failure,
  });
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
export async function dispatch(deps: MasterDeps, input: DispatchInput): Promise<DispatchResult> {
  const d = resolveDeps(deps);
  const valid = validateDispatchInput(input, d.newRequestId);
  const log = d.logger.child({ request_id: valid.requestId, minion_id: valid.minionId });

  const known = await d.store.get(valid.requestId);
  if (known !== undefined) return existingOrConflict(known, valid);

  // A cheap look before the network call; the decision is taken again under the lock.
  await d.store.withTarget(valid.minionId, async (unit) => refuseIfBlocked(await unit.blockers()));

  const capability = await checkCapability(d, valid.minionId);
  if (capability.kind === 'unreachable' || capability.kind === 'no_target') {
    log.warn({ capability: capability.kind, failure: capability.kind === 'unreachable' ? capability.failure : null }, 'capability call got no answer; nothing recorded');
    throw notAsked(capability, valid);
  }

  const reserved = await reserve(d, valid, capability.kind === 'rejected' ? capability.rejection : undefined);
  if ('existing' in reserved) return reserved.existing;
  const created = reserved.record;

  log.info({ jid: created.jid, state: created.state }, 'request recorded');
  if (capability.kind === 'rejected') return { outcome: 'rejected', record: created, rejection: capability.rejection };
  d.crashAt('P1');
  return publishPrepared(d, created, valid.stateDataJson);
}
