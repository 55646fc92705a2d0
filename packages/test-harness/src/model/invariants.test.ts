import { type ProtocolRequestRecord, type RequestEvent, applyEvent, createRequestRecord } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { stateViolation, stepViolation } from './invariants.js';
import { receiptFor, wireAnswer } from './minion-model.js';
import { AT, JIDS, MINION_ID, type ModelConfig, type ModelState, REQUEST_IDS, initialState } from './model-state.js';

/* Every invariant can fail: each hand-made bad state or step below breaks exactly the one named. */

const CONFIG: ModelConfig = { workers: 1, requests: 2, duplications: 0, masterCrashes: 0, minionCrashes: 0, refusals: 0, reconciles: 0, notSent: 0, capabilityRejections: false, stateResults: ['succeeded'] };
const start = initialState(CONFIG);
const prepared = (r: number) => createRequestRecord({ request_id: REQUEST_IDS[r] as string, minion_id: MINION_ID, profile: 'configure', state_digest: '', jid: JIDS[r] as string, at: AT });
/** applyEvent on a protocol record gives a protocol record. */
const applied = (record: ProtocolRequestRecord, event: RequestEvent) => applyEvent(record, event) as ProtocolRequestRecord;
const published = (r: number) => applied(applied(prepared(r), { type: 'intent_recorded', at: AT }), { type: 'publish_acked', at: AT });
const observed = (r: number, ret: ReturnType<typeof wireAnswer>) => applied(published(r), { type: 'observed', at: AT, answer: ret as never });

function state(change: Partial<ModelState>): ModelState {
  return { ...start, ...change };
}

describe('the model invariants', () => {
  it('hold in the initial state', () => {
    expect(stateViolation(start)).toBeUndefined();
  });

  it('catch a request whose state ran twice', () => {
    expect(stateViolation(state({ executions: [2, 0] }))?.invariant).toBe('at most one execution per request');
  });

  it('catch succeeded recorded without the receipt, and with a receipt of other counts', () => {
    const succeeded = observed(0, receiptFor(0, 'succeeded'));
    expect(stateViolation(state({ records: [succeeded, null] }))?.invariant).toBe('no succeeded (or failed) without an exact bound receipt');
    const other = wireAnswer(0, 'succeeded', { passed: 3, total: 3 });
    expect(stateViolation(state({ records: [succeeded, null], evidence: [{ index: true, record: other }, { index: false, record: null }] }))?.invariant).toBe('no succeeded (or failed) without an exact bound receipt');
    expect(stateViolation(state({ records: [succeeded, null], evidence: [{ index: true, record: receiptFor(0, 'succeeded') }, { index: false, record: null }], executions: [1, 0] }))).toBeUndefined();
  });

  it('catch a terminal record that changes, and a committed receipt that changes', () => {
    const before = state({ records: [observed(0, receiptFor(0, 'failed')), null], evidence: [{ index: true, record: receiptFor(0, 'failed') }, { index: false, record: null }] });
    expect(stepViolation(before, { ...before, records: [published(0), null] })?.invariant).toBe('no terminal result lost or changed');
    expect(stepViolation(before, { ...before, evidence: [{ index: true, record: receiptFor(0, 'succeeded') }, { index: false, record: null }] })?.invariant).toBe('no terminal result lost or changed');
    expect(stepViolation(before, before)).toBeUndefined();
  });

  it('catch two unresolved requests for one target', () => {
    expect(stateViolation(state({ records: [published(0), prepared(1)] }))?.invariant).toBe('at most one unresolved request per target');
  });

  it('catch a second publish call after one that may have sent', () => {
    expect(stateViolation(state({ republished: [true, false] }))?.invariant).toBe('no re-publication after a publish that may have sent');
  });

  it('catch a refusal the master accepted for a request whose state ran', () => {
    const refused = observed(0, wireAnswer(0, 'refused', undefined, 'execution_busy'));
    expect(refused.state).toBe('rejected');
    expect(stateViolation(state({ records: [refused, null], executions: [1, 0] }))?.invariant).toBe('a request released as refused never ran');
  });

  it('catch an execution_busy refusal decided while only the request\'s own twin held the execution lock', () => {
    const twin = { r: 0, phase: 'exec_locked', exec: true, result: null, reason: null } as const;
    const arrived = { r: 0, phase: 'arrived', exec: false, result: null, reason: null } as const;
    const deciding = { ...arrived, phase: 'R1', reason: 'execution_busy' } as const;
    const before = state({ jobs: [arrived, twin] });
    expect(stepViolation(before, { ...before, jobs: [deciding, twin] })?.invariant).toBe('execution_busy only while another request holds the execution lock');
    const other = { r: 1, phase: 'M4', exec: true, result: null, reason: null } as const;
    const busy = state({ jobs: [arrived, other] });
    expect(stepViolation(busy, { ...busy, jobs: [deciding, other] })).toBeUndefined();
  });

  it('catch a request quarantined because the minion refused it after answering running', () => {
    const running = observed(0, wireAnswer(0, 'running'));
    const contradicted = applied(running, { type: 'observed', at: AT, answer: wireAnswer(0, 'refused', undefined, 'not_ready') as never });
    expect(contradicted.state).toBe('quarantined');
    expect(stateViolation(state({ records: [contradicted, null] }))?.invariant).toBe('the minion never answers running for a request it then refuses');
  });
});
