import { statusEvent } from '@oduflow/master-runner';
import {
  ProtocolError,
  applyEvent,
  capabilityFailed,
  createRequestRecord,
  isBlocking,
  isPollable,
  isProtocolRecord,
  transitionCell,
  type ProtocolRequestRecord,
  type RequestEvent,
  type RequestRecord,
} from '@oduflow/protocol';
import { AT, JIDS, MINION_ID, type ModelConfig, type ModelState, REQUEST_IDS, type WorkerTask, recordText, replaced, withItem, withoutIndex } from './model-state.js';
import type { Step } from './step.js';

/*
 * The master: its workers run dispatch (validate, refuse a blocked target,
 * capability, record), publishPrepared (intent, one Salt call, outcome),
 * publish-pending and the poller; the event recorder commits `run` returns;
 * an operator reconciles. Every record change goes through the protocol's
 * applyEvent, and every answer through master-runner's statusEvent (which
 * validates it with parseStatusAnswer against the record's exact binding),
 * exactly as dispatch.ts, publish.ts, poll.ts and event-recorder.ts do. Each
 * commit is one atomic unit of the record store; network calls sit between
 * units, where a worker may crash (P1-P4, DESIGN §6).
 */

/** commitEvent with `stale: 'keep'` (commit.ts): an event that no longer applies leaves the stored record. */
function appliedOrKept(record: RequestRecord, event: RequestEvent): RequestRecord {
  try {
    return applyEvent(record, event);
  } catch (error) {
    if (ProtocolError.isInstance(error) && error.code === 'illegal_transition') return record;
    throw error;
  }
}

function protocolRecord(record: RequestRecord): ProtocolRequestRecord {
  if (!isProtocolRecord(record)) throw new Error('the model holds protocol records only');
  return record;
}

/** The same record of one request (its invariant fields are the request's own). */
function sameRecord(a: RequestRecord, b: RequestRecord): boolean {
  return a === b || recordText(protocolRecord(a)) === recordText(protocolRecord(b));
}

function withRecord(state: ModelState, r: number, record: RequestRecord): ModelState {
  return { ...state, records: replaced(state.records, r, protocolRecord(record)) };
}

function withTask(state: ModelState, w: number, task: WorkerTask): ModelState {
  return { ...state, workers: replaced(state.workers, w, task) };
}

const IDLE: WorkerTask = { kind: 'idle' };

/** Drops the status call of worker `w` and any answer to it (the call is over: answered, timed out or abandoned). */
function withoutCallOf(state: ModelState, w: number): ModelState {
  return { ...state, messages: state.messages.filter((m) => !((m.kind === 'ask' || m.kind === 'answer') && m.w === w)) };
}

function recordOf(state: ModelState, r: number): ProtocolRequestRecord {
  const record = state.records[r];
  if (record === null || record === undefined) throw new Error(`request ${r + 1} has no record`);
  return record;
}

function dispatchSteps(state: ModelState, config: ModelConfig, w: number): Step[] {
  const r = state.records.indexOf(null);
  if (r === -1) return [];
  const actor = `W${w + 1}`;
  const blocked = state.records.some((record) => record !== null && isBlocking(record));
  if (blocked && config.variant !== 'dispatch_ignores_blockers') return []; // refused with target_blocked: nothing recorded
  const prepared = createRequestRecord({ request_id: REQUEST_IDS[r] as string, minion_id: MINION_ID, profile: 'configure', state_digest: '', jid: JIDS[r] as string, at: AT });
  const firstPhase = config.variant === 'publish_before_intent' ? 'call' : 'intent';
  const steps: Step[] = [
    { actor, action: `dispatches request ${r + 1} (minion ready): records it prepared`, next: withTask(withRecord(state, r, prepared), w, { kind: 'publish', r, phase: firstPhase }) },
  ];
  if (config.capabilityRejections) {
    const rejected = applyEvent(prepared, capabilityFailed(AT, { code: 'not_ready', readiness: ['multiprocessing'] }));
    steps.push({ actor, action: `dispatches request ${r + 1} (minion not ready): records it rejected`, next: withRecord(state, r, rejected) });
  }
  return steps;
}

function idleSteps(state: ModelState, config: ModelConfig, w: number): Step[] {
  const actor = `W${w + 1}`;
  const steps = dispatchSteps(state, config, w);
  state.records.forEach((record, r) => {
    if (record === null) return;
    if (record.state === 'prepared') {
      // publish-pending: the same JID, the intent committed first (unless the variant says otherwise).
      if (config.variant === 'publish_before_intent') {
        steps.push({ actor, action: `publish-pending takes request ${r + 1}`, next: withTask(state, w, { kind: 'publish', r, phase: 'call' }) });
      } else {
        steps.push({
          actor,
          action: `publish-pending records the intent of request ${r + 1}`,
          next: withTask(withRecord(state, r, applyEvent(record, { type: 'intent_recorded', at: AT })), w, { kind: 'publish', r, phase: 'call' }),
        });
      }
    }
    if (isPollable(record)) {
      steps.push({
        actor,
        action: `reads request ${r + 1} (${record.state}) and asks the minion for its status`,
        next: withTask({ ...state, messages: withItem(state.messages, { kind: 'ask', w, r }) }, w, { kind: 'poll', r, snapshot: record }),
      });
    }
  });
  return steps;
}

function publishOutcomeEvent(outcome: 'acked' | 'uncertain' | 'not_sent'): RequestEvent {
  if (outcome === 'acked') return { type: 'publish_acked', at: AT };
  if (outcome === 'uncertain') return { type: 'publish_uncertain', at: AT, failure: 'timeout' };
  return { type: 'publish_not_sent', at: AT, failure: 'connection_refused' };
}

function callSalt(state: ModelState, w: number, r: number, lateIntent: boolean): Step[] {
  const actor = `W${w + 1}`;
  const again = state.mayHaveSent[r] === true;
  const sent = (s: ModelState): ModelState => ({
    ...s,
    messages: withItem(s.messages, { kind: 'publication', r }),
    mayHaveSent: replaced(s.mayHaveSent, r, true),
    republished: again ? replaced(s.republished, r, true) : s.republished,
  });
  const steps: Step[] = [
    { actor, action: `publishes request ${r + 1} through salt-api: acknowledged`, next: withTask(sent(state), w, { kind: 'publish_outcome', r, outcome: 'acked', lateIntent }) },
    { actor, action: `publishes request ${r + 1} through salt-api: timed out after sending`, next: withTask(sent(state), w, { kind: 'publish_outcome', r, outcome: 'uncertain', lateIntent }) },
  ];
  if (state.budget.notSent > 0) {
    const refused = { ...state, budget: { ...state.budget, notSent: state.budget.notSent - 1 }, republished: again ? replaced(state.republished, r, true) : state.republished };
    steps.push({ actor, action: `publishes request ${r + 1} through salt-api: connection refused, nothing sent`, next: withTask(refused, w, { kind: 'publish_outcome', r, outcome: 'not_sent', lateIntent }) });
  }
  return steps;
}

/** poll.ts settle(): skip when the answer says what the record read before the call says; else commit on the stored record. */
function settled(state: ModelState, config: ModelConfig, w: number, snapshot: ProtocolRequestRecord, event: RequestEvent, what: string): Step {
  const actor = `W${w + 1}`;
  const r = REQUEST_IDS.indexOf(snapshot.request_id as (typeof REQUEST_IDS)[number]);
  const done = withTask(withoutCallOf(state, w), w, IDLE);
  if (config.variant === 'republish_on_not_started' && event.type === 'observed' && event.answer.status === 'not_started') {
    return { actor, action: `${what}: not_started, so it publishes again`, next: withTask(done, w, { kind: 'publish', r, phase: 'call' }) };
  }
  const onSnapshot = appliedOrKept(snapshot, event);
  if (sameRecord(onSnapshot, snapshot)) return { actor, action: `${what}: nothing new, nothing written`, next: done };
  if (config.variant === 'poller_overwrites_stored_record') return { actor, action: `${what}: writes it over the stored record`, next: withRecord(done, r, onSnapshot) };
  return { actor, action: `${what}: commits it`, next: withRecord(done, r, appliedOrKept(recordOf(state, r), event)) };
}

function taskSteps(state: ModelState, config: ModelConfig, w: number): Step[] {
  const task = state.workers[w] as WorkerTask;
  const actor = `W${w + 1}`;
  switch (task.kind) {
    case 'idle':
      return idleSteps(state, config, w);
    case 'publish': {
      if (task.phase === 'call') return callSalt(state, w, task.r, config.variant === 'publish_before_intent');
      // publishPrepared: under the request lock, only a record still prepared takes the intent.
      const record = recordOf(state, task.r);
      const after = appliedOrKept(record, { type: 'intent_recorded', at: AT });
      if (sameRecord(after, record)) return [{ actor, action: `finds request ${task.r + 1} already ${record.state}: publishes nothing`, next: withTask(state, w, IDLE) }];
      return [{ actor, action: `records the intent of request ${task.r + 1}`, next: withTask(withRecord(state, task.r, after), w, { kind: 'publish', r: task.r, phase: 'call' }) }];
    }
    case 'publish_outcome': {
      let record: RequestRecord = recordOf(state, task.r);
      if (task.lateIntent) record = appliedOrKept(record, { type: 'intent_recorded', at: AT });
      const after = appliedOrKept(record, publishOutcomeEvent(task.outcome));
      return [{ actor, action: `records the publish outcome of request ${task.r + 1} (${task.outcome})`, next: withTask(withRecord(state, task.r, after), w, IDLE) }];
    }
    case 'poll': {
      const steps: Step[] = [];
      state.messages.forEach((message, i) => {
        if (message.kind !== 'answer' || message.w !== w) return;
        const event = statusEvent(task.snapshot, { kind: 'returned', retcode: 0, ret: message.ret }, AT);
        steps.push(settled({ ...state, messages: withoutIndex(state.messages, i) }, config, w, task.snapshot, event, `takes the status answer of request ${task.r + 1} (${message.ret.status})`));
      });
      const timeout = statusEvent(task.snapshot, { kind: 'no_return' }, AT);
      steps.push(settled(state, config, w, task.snapshot, timeout, `times out waiting for the status of request ${task.r + 1}`));
      return steps;
    }
  }
}

/** Every move of the master: each worker's next step or crash, the event recorder, the operator. */
export function masterSteps(state: ModelState, config: ModelConfig): Step[] {
  const steps: Step[] = [];
  state.workers.forEach((task, w) => {
    steps.push(...taskSteps(state, config, w));
    if (task.kind !== 'idle' && state.budget.masterCrashes > 0) {
      const crashed = withTask(withoutCallOf(state, w), w, IDLE);
      steps.push({ actor: `W${w + 1}`, action: `crashes while it ${task.kind === 'poll' ? 'polls' : 'publishes'} request ${task.r + 1}`, next: { ...crashed, budget: { ...crashed.budget, masterCrashes: crashed.budget.masterCrashes - 1 } } });
    }
  });
  state.messages.forEach((message, i) => {
    if (message.kind !== 'run_return') return;
    if (i > 0 && JSON.stringify(message) === JSON.stringify(state.messages[i - 1])) return;
    const record = recordOf(state, message.r);
    const event = statusEvent(record, { kind: 'returned', retcode: message.retcode, ret: message.ret }, AT);
    const rest = { ...state, messages: withoutIndex(state.messages, i) };
    // The recorder commits only what validates as a status answer; anything else is left to the poller.
    const next = event.type === 'observed' ? withRecord(rest, message.r, appliedOrKept(record, event)) : rest;
    steps.push({ actor: 'recorder', action: `records the run return of request ${message.r + 1} (${message.ret.status})`, next });
  });
  if (state.budget.reconciles > 0) {
    state.records.forEach((record, r) => {
      if (record === null || transitionCell(record.state, 'reconciled') !== 'apply') return;
      const reconciled = applyEvent(record, { type: 'reconciled', at: AT, reason: 'checked on the machine', actor: 'operator' });
      const next = withRecord({ ...state, budget: { ...state.budget, reconciles: state.budget.reconciles - 1 } }, r, reconciled);
      steps.push({ actor: 'operator', action: `reconciles request ${r + 1} (${record.state})`, next });
    });
  }
  return steps;
}
