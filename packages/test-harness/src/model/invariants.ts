import { ProtocolError, isBlocking, isTerminal, parseReceipt, type ProtocolRequestRecord } from '@oduflow/protocol';
import type { ModelState } from './model-state.js';

/*
 * What must hold in every reachable state (DESIGN §6 "Invariants checked
 * everywhere", and §5's publish-once rule), and across every step. Each
 * returns a sentence about what broke, or undefined.
 */

export interface Invariant {
  readonly name: string;
  /** `state`: holds in every reachable state; `step`: holds across every step (checked on every transition, not only new states). */
  readonly kind: 'state' | 'step';
  /** Checks one state, or the step from `before` to `after`. */
  readonly check: (after: ModelState, before: ModelState | undefined) => string | undefined;
}

function bindingOf(record: ProtocolRequestRecord) {
  return { minion_id: record.minion_id, request_id: record.request_id, jid: record.jid, profile: record.profile, state_digest: record.state_digest };
}

function firstOf(count: number, problem: (r: number) => string | undefined): string | undefined {
  for (let r = 0; r < count; r += 1) {
    const found = problem(r);
    if (found !== undefined) return found;
  }
  return undefined;
}

export const INVARIANTS: readonly Invariant[] = [
  {
    name: 'at most one execution per request',
    kind: 'state',
    check: (s) => firstOf(s.executions.length, (r) => ((s.executions[r] as number) > 1 ? `the state of request ${r + 1} ran ${s.executions[r]} times` : undefined)),
  },
  {
    name: 'no succeeded (or failed) without an exact bound receipt',
    kind: 'state',
    check: (s) =>
      firstOf(s.records.length, (r) => {
        const record = s.records[r];
        if (record === null || record === undefined || (record.state !== 'succeeded' && record.state !== 'failed')) return undefined;
        const receipt = s.evidence[r]?.record;
        try {
          const proven = parseReceipt(receipt, bindingOf(record));
          if (proven.status === record.state && proven.passed === record.passed && proven.total === record.total) return undefined;
        } catch (error) {
          if (!ProtocolError.isInstance(error)) throw error;
        }
        return `request ${r + 1} is recorded ${record.state} ${record.passed}/${record.total} but the minion holds ${receipt === null ? 'no record' : `a ${String(receipt?.status)} record`}`;
      }),
  },
  {
    name: 'no terminal result lost or changed',
    kind: 'step',
    check: (s, before) =>
      before === undefined
        ? undefined
        : firstOf(s.records.length, (r) => {
            const was = before.records[r];
            if (was !== null && was !== undefined && s.records[r] !== was && isTerminal(was) && JSON.stringify(s.records[r]) !== JSON.stringify(was)) {
              return `request ${r + 1} was ${was.state} and is now ${s.records[r]?.state}`;
            }
            const receipt = before.evidence[r]?.record;
            if (receipt != null && s.evidence[r]?.record !== receipt && receipt.status !== 'running' && JSON.stringify(s.evidence[r]?.record) !== JSON.stringify(receipt)) {
              return `the minion's ${receipt.status} record of request ${r + 1} changed`;
            }
            return undefined;
          }),
  },
  {
    name: 'at most one unresolved request per target',
    kind: 'state',
    check: (s) => {
      const blocking = s.records.flatMap((record, r) => (record !== null && isBlocking(record) ? [`${r + 1} (${record.state})`] : []));
      return blocking.length > 1 ? `requests ${blocking.join(' and ')} are unresolved for the same target at once` : undefined;
    },
  },
  {
    name: 'no re-publication after a publish that may have sent',
    kind: 'state',
    check: (s) => firstOf(s.republished.length, (r) => (s.republished[r] === true ? `request ${r + 1} was handed to Salt again after a publish call that may have sent it` : undefined)),
  },
  {
    name: 'a request released as refused never ran',
    kind: 'state',
    check: (s) =>
      firstOf(s.records.length, (r) => {
        const record = s.records[r];
        return record?.state === 'rejected' && record.reason?.code === 'refused' && (s.executions[r] as number) > 0 ? `request ${r + 1} is released as refused but its state ran` : undefined;
      }),
  },
  {
    // A refusal is evidence (DESIGN §4): `execution_busy` must be true when decided, never a job's own twin.
    name: 'execution_busy only while another request holds the execution lock',
    kind: 'step',
    check: (s, before) =>
      before === undefined
        ? undefined
        : firstOf(s.evidence.length, (r) => {
            const deciding = (state: ModelState) => state.jobs.filter((job) => job.r === r && job.phase === 'R1' && job.reason === 'execution_busy').length;
            if (deciding(s) <= deciding(before) || before.jobs.some((job) => job.exec && job.r !== r)) return undefined;
            const own = before.jobs.some((job) => job.exec && job.r === r);
            return `request ${r + 1} was refused execution_busy while ${own ? `only its own twin (a delivery of request ${r + 1})` : 'no job'} held the execution lock`;
          }),
  },
  {
    // A minion writes a refusal only where no claim exists, so a refusal after `running` is its own contradiction.
    name: 'the minion never answers running for a request it then refuses',
    kind: 'state',
    check: (s) =>
      firstOf(s.records.length, (r) => {
        const record = s.records[r];
        if (record?.state !== 'quarantined' || record.reason?.code !== 'refused_after_running') return undefined;
        const ran = s.executions[r] as number;
        return `request ${r + 1} was answered running, then refused: the master quarantined ${ran === 0 ? 'a request that never ran' : `a request whose state ran ${ran} times`}`;
      }),
  },
];

export interface Violation {
  readonly invariant: string;
  readonly problem: string;
}

function firstBroken(kind: Invariant['kind'], after: ModelState, before: ModelState | undefined): Violation | undefined {
  for (const invariant of INVARIANTS) {
    if (invariant.kind !== kind) continue;
    const problem = invariant.check(after, before);
    if (problem !== undefined) return { invariant: invariant.name, problem };
  }
  return undefined;
}

/** The first state invariant `state` breaks. */
export function stateViolation(state: ModelState): Violation | undefined {
  return firstBroken('state', state, undefined);
}

/** The first step invariant the step from `before` to `after` breaks. */
export function stepViolation(before: ModelState, after: ModelState): Violation | undefined {
  return firstBroken('step', after, before);
}
