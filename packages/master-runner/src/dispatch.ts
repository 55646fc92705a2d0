import {
  applyEvent,
  createRequestRecord,
  isProtocolRecord,
  type ProtocolRequestRecord,
  type RequestRecord,
} from '@oduflow/protocol';
import { checkCapability } from './capability.js';
import { nowIso } from './commit.js';
import { resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
import { validateDispatchInput, type DispatchInput, type ValidDispatch } from './dispatch-input.js';
import { MasterRunnerError } from './errors.js';
import { jidForInstant, nextJid } from './jid.js';
import { publishPrepared, type PublishResultKind } from './publish.js';
import type { TargetUnit } from './record-store.js';

export type DispatchOutcome =
  | PublishResultKind
  /** The minion did not prove protocol 1: recorded as `rejected`, nothing published. */
  | 'rejected'
  /** The caller's request id already exists with the same binding: nothing was done again. */
  | 'existing';

export interface DispatchResult {
  readonly outcome: DispatchOutcome;
  readonly record: RequestRecord;
  readonly reason?: string;
}

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

function refuseIfBlocked(blockers: readonly RequestRecord[], input: ValidDispatch): void {
  const first = blockers[0];
  if (first === undefined) return;
  throw new MasterRunnerError(
    'target_blocked',
    `target has an unresolved request (${first.request_id}, ${first.state}); poll it or reconcile it first`,
    { requestId: first.request_id, detail: first.state },
  );
}

/** Creates the record under the target lock with the first free JID at or after the clock's. */
async function createWithUniqueJid(
  deps: ResolvedDeps,
  unit: TargetUnit,
  build: (jid: string) => ProtocolRequestRecord,
  input: ValidDispatch,
): Promise<{ readonly record: ProtocolRequestRecord } | { readonly existing: DispatchResult }> {
  let jid = jidForInstant(deps.now());
  for (let bump = 0; bump < MAX_JID_BUMPS; bump += 1) {
    const created = await unit.create(build(jid));
    if (created.created) return { record: created.record };
    if (created.reason === 'request_exists') return { existing: existingOrConflict(created.existing, input) };
    jid = nextJid(jid);
  }
  throw new MasterRunnerError('internal', 'no free JID found near the current time');
}

/**
 * Dispatches one managed apply (DESIGN §5): validate; refuse a blocked target;
 * verify the minion's capability (failure → `rejected`, nothing published);
 * persist the record with a JID unique in the store; persist the publish
 * intent; publish once; record the acknowledgement.
 *
 * Throws MasterRunnerError for refusals (`invalid_input`, `target_blocked`,
 * `request_conflict`) and store failures; every Salt outcome is a result.
 */
export async function dispatch(deps: MasterDeps, input: DispatchInput): Promise<DispatchResult> {
  const d = resolveDeps(deps);
  const valid = validateDispatchInput(input, d.newRequestId);
  const log = d.logger.child({ request_id: valid.requestId, minion_id: valid.minionId });

  const known = await d.store.get(valid.requestId);
  if (known !== undefined) return existingOrConflict(known, valid);

  // A cheap look before the network call; the decision is taken again under the lock.
  await d.store.withTarget(valid.minionId, async (unit) => refuseIfBlocked(await unit.blockers(), valid));

  const capability = await checkCapability(d, valid.minionId);

  const reserved = await d.store.withTarget(valid.minionId, async (unit): Promise<{ readonly record: ProtocolRequestRecord } | { readonly existing: DispatchResult }> => {
    // The request id first: a concurrent dispatch of the same request must
    // see its own record as `existing`, not as a blocker of the target.
    const raced = await d.store.get(valid.requestId);
    if (raced !== undefined) return { existing: existingOrConflict(raced, valid) };
    refuseIfBlocked(await unit.blockers(), valid);
    const at = nowIso(d);
    return createWithUniqueJid(
      d,
      unit,
      (jid) => {
        const prepared = createRequestRecord({
          request_id: valid.requestId,
          minion_id: valid.minionId,
          profile: valid.profile,
          state_digest: valid.stateDigest,
          jid,
          at,
        });
        return capability.ok
          ? prepared
          : (applyEvent(prepared, { type: 'capability_failed', at, reason: capability.reason }) as ProtocolRequestRecord);
      },
      valid,
    );
  });
  if ('existing' in reserved) return reserved.existing;
  const created = reserved.record;

  log.info({ jid: created.jid, state: created.state }, 'request recorded');
  if (created.state === 'rejected') {
    return { outcome: 'rejected', record: created, reason: created.reason ?? 'capability_missing' };
  }
  d.crashAt('P1');
  return publishPrepared(d, created, valid.stateDataJson);
}
