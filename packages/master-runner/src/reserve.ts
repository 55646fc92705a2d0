import {
  applyEvent,
  capabilityFailed,
  createRequestRecord,
  type CapabilityRejection,
  type ProtocolRequestRecord,
  type RequestRecord,
} from '@oduflow/protocol';
import type { CapabilityCheck } from './capability.js';
import { nowIso } from './commit.js';
import type { ResolvedDeps } from './deps.js';
import type { ValidDispatch } from './dispatch-input.js';
import { MasterRunnerError } from './errors.js';
import { jidForInstant, nextJid } from './jid.js';
import type { CreateOptions, TargetUnit } from './record-store.js';

/*
 * The steps dispatch and admission share: refuse a blocked target, turn a
 * capability call that proved nothing into "nothing recorded", and, under
 * the target lock, create the record with a JID the store never held.
 */

/** How many consecutive JIDs are tried before giving up (each taken one is a microsecond later). */
const MAX_JID_BUMPS = 10_000;

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

/**
 * A cheap look before a network call, without the target lock (no write, no
 * wait): the decision is taken again under the lock by reserve, so a create
 * that races this look only costs a refusal there, never a second blocker.
 */
export async function refuseIfTargetBlocked(d: ResolvedDeps, minionId: string): Promise<void> {
  refuseIfBlocked(await d.store.blockersOf(minionId));
}

/**
 * A capability call that proved nothing about the minion leaves no record:
 * recording it would burn a request id over a transient fault (an
 * Idempotency-Key retry must be able to succeed later).
 */
export function notAsked(check: Extract<CapabilityCheck, { kind: 'unreachable' | 'no_target' }>, requestId: string): MasterRunnerError {
  if (check.kind === 'no_target') {
    return new MasterRunnerError('no_target', 'no accepted minion key matches this minion id; nothing was recorded', { requestId });
  }
  return new MasterRunnerError('minion_unreachable', 'the minion did not answer its capability call; nothing was recorded, retry later', {
    requestId,
    detail: check.failure,
  });
}

export type Reservation =
  /** The record was stored (prepared, or rejected with the capability's reason). */
  | { readonly kind: 'created'; readonly record: ProtocolRequestRecord }
  /** A record with this request id exists already (as stored): nothing was created. */
  | { readonly kind: 'existing'; readonly record: RequestRecord }
  /** The create was given a key whose claim is no longer this request's: nothing was stored. */
  | { readonly kind: 'claim_lost' };

/** Creates the record under the target lock with the first free JID at or after the clock's. */
async function createWithUniqueJid(
  d: ResolvedDeps,
  unit: TargetUnit,
  build: (jid: string) => ProtocolRequestRecord,
  options: CreateOptions | undefined,
): Promise<Reservation> {
  let jid = jidForInstant(d.now());
  for (let bump = 0; bump < MAX_JID_BUMPS; bump += 1) {
    const created = await unit.create(build(jid), options);
    if (created.created) return { kind: 'created', record: created.record };
    if (created.reason === 'request_exists') return { kind: 'existing', record: created.existing };
    if (created.reason === 'claim_lost') return { kind: 'claim_lost' };
    jid = nextJid(jid);
  }
  throw new MasterRunnerError('internal', 'no free JID found near the current time');
}

/**
 * Under the target lock: the request id first, then the blockers (refused
 * with target_blocked), then the record with its JID — `prepared`, or
 * `rejected` with `rejection` — created with `options` (an admission's key
 * and outbox entry).
 */
export function reserve(
  d: ResolvedDeps,
  valid: ValidDispatch,
  rejection: CapabilityRejection | undefined,
  options?: CreateOptions,
): Promise<Reservation> {
  return d.store.withTarget(valid.minionId, async (unit): Promise<Reservation> => {
    // The request id first: a concurrent dispatch of the same request must
    // see its own record as `existing`, not as a blocker of the target.
    const raced = await d.store.get(valid.requestId);
    if (raced !== undefined) return { kind: 'existing', record: raced };
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
    return createWithUniqueJid(d, unit, build, options);
  });
}
