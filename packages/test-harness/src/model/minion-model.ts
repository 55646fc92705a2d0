import { PROTOCOL_VERSION, type RefusalReason, type TerminalStatus, reduceStateResult } from '@oduflow/protocol';
import { type BrokenVariant, JIDS, type Job, MINION_ID, type MinionRecord, type ModelState, REQUEST_IDS, type ModelConfig, replaced, withItem, withoutIndex } from './model-state.js';
import type { Step } from './step.js';

/*
 * A small abstraction of oduflow_job.py (module 1.1.1): what `run` writes,
 * in which order, under which locks (DESIGN §4, the module's `_run`,
 * `_apply`, `_refuse`, `_commit_refusal`: the request lock first, then the
 * execution lock), and what `status` answers from that evidence (the DESIGN
 * §4 table, the module's `_status`, which waits out a JID index alone under
 * a busy request lock). Each atomic write is one step, so a job can be
 * killed (SIGKILL) between any two: M1-M6 and R1-R2 of DESIGN §6. Locks are
 * kernel flocks: a killed job releases them. Module 1.1.0's lock order and
 * status are kept as broken variants.
 */

/** What `state.sls` returned, per outcome, reduced by the protocol's own reduction. */
const STATE_RETURNS: Readonly<Record<TerminalStatus, unknown>> = {
  succeeded: { 'test_|-a_|-a_|-nop': { result: true }, 'test_|-b_|-b_|-nop': { result: true } },
  failed: { 'test_|-a_|-a_|-nop': { result: true }, 'test_|-b_|-b_|-nop': { result: false } },
  unknown: ['a render error'],
};

/** An answer or record of the module for request `r`: the nine keys, plus `reason` for a refusal. */
export function wireAnswer(r: number, status: string, counts = { passed: 0, total: 0 }, reason?: RefusalReason): MinionRecord {
  return {
    protocol: PROTOCOL_VERSION,
    minion_id: MINION_ID,
    request_id: REQUEST_IDS[r],
    jid: JIDS[r],
    profile: 'configure',
    state_digest: '',
    status,
    passed: counts.passed,
    total: counts.total,
    ...(reason === undefined ? {} : { reason }),
  };
}

export function receiptFor(r: number, result: TerminalStatus): MinionRecord {
  const reduced = reduceStateResult(STATE_RETURNS[result]);
  return wireAnswer(r, reduced.status, { passed: reduced.passed, total: reduced.total });
}

const REQUEST_LOCKED: ReadonlySet<Job['phase']> = new Set(['request_locked', 'M1', 'M2', 'M3', 'M4', 'M5', 'M6', 'R1', 'R1_index', 'R2']);

/** A live job of request `r` holds its request lock. */
function requestLockHeld(state: ModelState, r: number): boolean {
  return state.jobs.some((job) => job.r === r && REQUEST_LOCKED.has(job.phase));
}

function executionLockHeld(state: ModelState): boolean {
  return state.jobs.some((job) => job.exec);
}

/** A receipt or a refusal. Guarded by the final statuses: where it is false, the record may still be a running claim (not only null). */
function isFinal(record: MinionRecord | null): record is MinionRecord & { readonly status: 'succeeded' | 'failed' | 'unknown' | 'refused' } {
  return record !== null && ['succeeded', 'failed', 'unknown', 'refused'].includes(record.status);
}

/**
 * `oduflow_job.status` for request `r` (DESIGN §4 table), or null while it
 * waits: a JID index alone under a busy request lock is a worker between
 * its first two writes, and the second may be a refusal record, so status
 * waits for the record or the lock. The module bounds that wait (250 ms)
 * by far more than two atomic writes take; the model assumes the writes
 * finish within it (past it the module answers `running`, and a refusal
 * that still followed would be quarantined: the broken variant shows that).
 */
export function statusAnswer(state: ModelState, r: number, variant?: BrokenVariant): MinionRecord | null {
  const { index, record } = state.evidence[r] as ModelState['evidence'][number];
  if (isFinal(record)) return record; // an exact receipt, or the refusal with its reason
  if (!index && record === null) return wireAnswer(r, 'not_started');
  if (!requestLockHeld(state, r)) return wireAnswer(r, 'unknown');
  if (record === null && variant !== 'status_running_between_refusal_writes') return null;
  return wireAnswer(r, 'running');
}

function jobAt(state: ModelState, i: number): Job {
  return state.jobs[i] as Job;
}

function withJob(state: ModelState, i: number, job: Job | null): ModelState {
  const rest = withoutIndex(state.jobs, i);
  return { ...state, jobs: job === null ? rest : withItem(rest, job) };
}

function written(state: ModelState, r: number, change: Partial<ModelState['evidence'][number]>): ModelState {
  return { ...state, evidence: replaced(state.evidence, r, { ...(state.evidence[r] as ModelState['evidence'][number]), ...change }) };
}

/** The job ends and `run` returns `ret` (retcode 1 for a refusal): it goes on the event bus. */
function returned(state: ModelState, i: number, ret: MinionRecord): ModelState {
  const ended = withJob(state, i, null);
  return { ...ended, messages: withItem(ended.messages, { kind: 'run_return', r: jobAt(state, i).r, retcode: ret.status === 'refused' ? 1 : 0, ret }) };
}

/**
 * What `run` answers for a publication that already left evidence
 * (`_answer_from_evidence`): the final record, or `already_claimed`, an
 * error the event recorder ignores (so it is not put on the bus).
 */
function answeredFromEvidence(state: ModelState, i: number): ModelState {
  const record = (state.evidence[jobAt(state, i).r] as ModelState['evidence'][number]).record;
  return isFinal(record) ? returned(state, i, record) : withJob(state, i, null);
}

function hasEvidence(state: ModelState, r: number): boolean {
  const { index, record } = state.evidence[r] as ModelState['evidence'][number];
  return index || record !== null;
}

/**
 * Module 1.1.0's `_refuse` (the variant that takes the execution lock
 * first): take the request lock without waiting on a living worker; when it
 * is held, give up with a plain error (nothing recorded); else refuse from
 * the evidence, or decide a refusal (R1) when there is none.
 */
function refusing(state: ModelState, i: number, reason: RefusalReason, label: string): Step[] {
  const job = jobAt(state, i);
  const actor = `minion job ${job.r + 1}`;
  if (requestLockHeld(state, job.r)) {
    return [{ actor, action: `${label}: the request lock is busy, answers the error ${reason} and records nothing`, next: withJob(state, i, null) }];
  }
  if (hasEvidence(state, job.r)) return [{ actor, action: `${label}: evidence exists, answers from it`, next: answeredFromEvidence(state, i) }];
  return [{ actor, action: `${label}: decides to refuse (${reason}) [R1]`, next: withJob(state, i, { ...job, phase: 'R1', reason }) }];
}

function spent(state: ModelState): ModelState {
  return { ...state, budget: { ...state.budget, refusals: state.budget.refusals - 1 } };
}

/** The broken variant minion_reruns_abandoned_claim: a claim without a receipt is run again. */
function rerunsClaim(state: ModelState, config: ModelConfig, r: number): boolean {
  const evidence = state.evidence[r] as ModelState['evidence'][number];
  return config.variant === 'minion_reruns_abandoned_claim' && hasEvidence(state, r) && !isFinal(evidence.record);
}

/** Holding both locks with nothing to answer from: claim (M1), or find a parallel state in the role and refuse. */
function applying(state: ModelState, i: number, how: string, rerun: boolean): Step[] {
  const job = jobAt(state, i);
  const actor = `minion job ${job.r + 1}`;
  const found = rerun ? 'finds a claim without a receipt and runs it again' : 'finds no evidence';
  const steps: Step[] = [{ actor, action: `${how}, ${found} [M1]`, next: withJob(state, i, { ...job, phase: 'M1', exec: true }) }];
  if (state.budget.refusals > 0) {
    steps.push({ actor, action: `${how}, finds a parallel state in the role, decides to refuse [R1]`, next: withJob(spent(state), i, { ...job, phase: 'R1', exec: true, reason: 'parallel_refused' }) });
  }
  return steps;
}

/** Module 1.1.0's `_run` (broken variant): the execution lock first, the request lock second. */
function executionLockFirst(state: ModelState, i: number): Step[] {
  const job = jobAt(state, i);
  const actor = `minion job ${job.r + 1}`;
  const steps: Step[] = [];
  if (state.budget.refusals > 0) steps.push(...refusing(spent(state), i, 'not_ready', 'not ready at run time'));
  if (executionLockHeld(state)) steps.push(...refusing(state, i, 'execution_busy', 'execution lock busy'));
  else steps.push({ actor, action: 'takes the execution lock', next: withJob(state, i, { ...job, phase: 'exec_locked', exec: true }) });
  return steps;
}

function jobSteps(state: ModelState, config: ModelConfig, i: number): Step[] {
  const job = jobAt(state, i);
  const actor = `minion job ${job.r + 1}`;
  const r = job.r;
  switch (job.phase) {
    case 'arrived': {
      if (config.variant === 'minion_takes_execution_lock_first') return executionLockFirst(state, i);
      // `_run`: the request lock first, without waiting on a living worker of this request.
      if (requestLockHeld(state, r)) {
        return [{ actor, action: 'finds the request lock held by a living worker of this request: answers an error, records nothing', next: withJob(state, i, null) }];
      }
      return [{ actor, action: 'takes the request lock', next: withJob(state, i, { ...job, phase: 'request_locked' }) }];
    }
    case 'request_locked': {
      const rerun = rerunsClaim(state, config, r);
      if (hasEvidence(state, r) && !rerun) return [{ actor, action: 'finds evidence, answers from it', next: answeredFromEvidence(state, i) }];
      const steps: Step[] = [];
      if (state.budget.refusals > 0 && !rerun) {
        steps.push({ actor, action: 'is not ready at run time: decides to refuse (not_ready) [R1]', next: withJob(spent(state), i, { ...job, phase: 'R1', reason: 'not_ready' }) });
      }
      if (!executionLockHeld(state)) {
        steps.push(...applying(state, i, 'takes the execution lock', rerun));
      } else if (rerun) {
        steps.push({ actor, action: 'finds the execution lock busy, then evidence: answers from it', next: answeredFromEvidence(state, i) });
      } else {
        // Every holder of the execution lock took its own request lock first: another request applies.
        steps.push({ actor, action: 'finds the execution lock busy: decides to refuse (execution_busy) [R1]', next: withJob(state, i, { ...job, phase: 'R1', reason: 'execution_busy' }) });
      }
      return steps;
    }
    case 'exec_locked': {
      if (requestLockHeld(state, r)) return []; // blocks on the request lock
      const rerun = rerunsClaim(state, config, r);
      if (hasEvidence(state, r) && !rerun) {
        return [{ actor, action: 'takes the request lock, finds evidence, answers from it', next: answeredFromEvidence(state, i) }];
      }
      return applying(state, i, 'takes the request lock', rerun);
    }
    case 'M1':
      return [{ actor, action: 'commits the JID index [M2]', next: written(withJob(state, i, { ...job, phase: 'M2' }), r, { index: true }) }];
    case 'M2':
      return [{ actor, action: 'commits the running claim [M3]', next: written(withJob(state, i, { ...job, phase: 'M3' }), r, { record: wireAnswer(r, 'running') }) }];
    case 'M3': {
      const ran = withJob(state, i, { ...job, phase: 'M4' });
      return [{ actor, action: 'calls state.sls: the state runs [M4]', next: { ...ran, executions: replaced(ran.executions, r, (ran.executions[r] as number) + 1) } }];
    }
    case 'M4':
      return config.stateResults.map((result) => ({ actor, action: `state.sls returns (${result}) [M5]`, next: withJob(state, i, { ...job, phase: 'M5', result }) }));
    case 'M5':
      return [{ actor, action: 'commits the receipt [M6]', next: written(withJob(state, i, { ...job, phase: 'M6' }), r, { record: receiptFor(r, job.result as TerminalStatus) }) }];
    case 'M6':
      return [{ actor, action: 'run returns the receipt', next: returned(state, i, receiptFor(r, job.result as TerminalStatus)) }];
    case 'R1':
      return [{ actor, action: 'commits the JID index of the refusal', next: written(withJob(state, i, { ...job, phase: 'R1_index' }), r, { index: true }) }];
    case 'R1_index': {
      const refused = wireAnswer(r, 'refused', undefined, job.reason as RefusalReason);
      return [{ actor, action: 'commits the refusal record [R2]', next: written(withJob(state, i, { ...job, phase: 'R2' }), r, { record: refused }) }];
    }
    case 'R2':
      return [{ actor, action: 'run returns refused', next: returned(state, i, wireAnswer(r, 'refused', undefined, job.reason as RefusalReason)) }];
  }
}

/** Every move of the minion: each live job's next step, a SIGKILL of any job, and status calls answered. */
export function minionSteps(state: ModelState, config: ModelConfig): Step[] {
  const steps: Step[] = [];
  state.jobs.forEach((job, i) => {
    if (i > 0 && JSON.stringify(job) === JSON.stringify(state.jobs[i - 1])) return; // an identical job moves the same way
    steps.push(...jobSteps(state, config, i));
    if (state.budget.minionCrashes > 0) {
      const killed = withJob(state, i, null);
      steps.push({ actor: `minion job ${job.r + 1}`, action: `is killed (SIGKILL) at ${job.phase}`, next: { ...killed, budget: { ...killed.budget, minionCrashes: killed.budget.minionCrashes - 1 } } });
    }
  });
  state.messages.forEach((message, i) => {
    if (message.kind !== 'ask') return;
    const rest = withoutIndex(state.messages, i);
    const ret = statusAnswer(state, message.r, config.variant);
    if (ret === null) return; // waits for the record or the request lock
    steps.push({
      actor: 'minion',
      action: `answers status of request ${message.r + 1} for W${message.w + 1}: ${ret.status}`,
      next: { ...state, messages: withItem(rest, { kind: 'answer', w: message.w, r: message.r, ret }) },
    });
  });
  return steps;
}

/** A publication delivered to the minion starts a run job. */
export function delivered(state: ModelState, r: number): ModelState {
  return { ...state, jobs: withItem(state.jobs, { r, phase: 'arrived', exec: false, result: null, reason: null }) };
}
