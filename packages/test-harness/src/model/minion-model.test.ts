import { parseStatusAnswer } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { delivered, minionSteps, receiptFor, statusAnswer, wireAnswer } from './minion-model.js';
import { JIDS, MINION_ID, type ModelConfig, type ModelState, REQUEST_IDS, initialState } from './model-state.js';

/* The minion abstraction against DESIGN §4: what status answers from each kind of evidence, and the order of the writes. */

const CONFIG: ModelConfig = { workers: 1, requests: 1, duplications: 0, masterCrashes: 0, minionCrashes: 1, refusals: 0, reconciles: 0, notSent: 0, capabilityRejections: false, stateResults: ['succeeded'] };
const BINDING = { minion_id: MINION_ID, request_id: REQUEST_IDS[0], jid: JIDS[0], profile: 'configure', state_digest: '' } as const;
const start = initialState(CONFIG);

function withEvidence(index: boolean, record: ModelState['evidence'][number]['record'], jobs: ModelState['jobs'] = []): ModelState {
  return { ...start, evidence: [{ index, record }], jobs };
}

/** Runs the job's only step until `until` (a phase) or the end, without kills. */
function advance(state: ModelState, steps: number): ModelState {
  let s = state;
  for (let i = 0; i < steps; i += 1) {
    const next = minionSteps(s, CONFIG).filter((step) => !step.action.startsWith('is killed'));
    if (next.length !== 1) throw new Error(`expected one step, found ${next.length}`);
    s = (next[0] as (typeof next)[number]).next;
  }
  return s;
}

describe('the minion abstraction', () => {
  it('answers from its evidence as the DESIGN §4 table says, always a valid bound status answer', () => {
    const running = { r: 0, phase: 'M4', exec: true, result: null, reason: null } as const;
    const rows: Array<[string, ModelState, string]> = [
      ['nothing for this request', withEvidence(false, null), 'not_started'],
      ['a JID index alone, no live lock', withEvidence(true, null), 'unknown'],
      ['a claim without a receipt, no live lock', withEvidence(true, wireAnswer(0, 'running')), 'unknown'],
      ['a claim with a live request lock', withEvidence(true, wireAnswer(0, 'running'), [running]), 'running'],
      ['an exact terminal receipt', withEvidence(true, receiptFor(0, 'failed')), 'failed'],
      ['a refusal record', withEvidence(true, wireAnswer(0, 'refused', undefined, 'not_ready')), 'refused'],
    ];
    for (const [what, state, status] of rows) {
      const answer = statusAnswer(state, 0);
      expect(answer?.status, what).toBe(status);
      expect(parseStatusAnswer(answer, BINDING).status, what).toBe(status);
    }
  });

  it('commits the JID index, then the claim, then runs the state, then commits the receipt, then returns it', () => {
    let s = delivered(start, 0);
    const seen: string[] = [];
    for (let i = 0; i < 8; i += 1) {
      s = advance(s, 1);
      seen.push(`${s.evidence[0]?.index ? 'index' : '-'}/${s.evidence[0]?.record?.status ?? '-'}/${s.executions[0]}`);
    }
    expect(seen).toStrictEqual(['-/-/0', '-/-/0', 'index/-/0', 'index/running/0', 'index/running/1', 'index/running/1', 'index/succeeded/1', 'index/succeeded/1']);
    expect(s.jobs).toStrictEqual([]);
    expect(s.messages).toStrictEqual([{ kind: 'run_return', r: 0, retcode: 0, ret: receiptFor(0, 'succeeded') }]);
  });

  it('never runs a publication again after its job was killed with a claim on disk', () => {
    // Kill the job right after the claim (M3), then deliver the same publication again.
    let s = advance(delivered(start, 0), 4);
    expect(s.jobs[0]?.phase).toBe('M3');
    const kill = minionSteps(s, CONFIG).find((step) => step.action.startsWith('is killed'));
    s = delivered((kill as NonNullable<typeof kill>).next, 0);
    s = advance(s, 2);
    expect(s.jobs).toStrictEqual([]);
    expect(s.executions).toStrictEqual([0]);
    expect(statusAnswer(s, 0)?.status).toBe('unknown');
  });

  it('makes status wait while a JID index alone sits under a living request lock, then answers the refusal that follows', () => {
    const refusing = { r: 0, phase: 'R1_index', exec: false, result: null, reason: 'not_ready' } as const;
    const between = withEvidence(true, null, [refusing]);
    expect(statusAnswer(between, 0)).toBeNull();
    const asked: ModelState = { ...between, messages: [{ kind: 'ask', w: 0, r: 0 }] };
    expect(minionSteps(asked, CONFIG).filter((step) => step.action.startsWith('answers status'))).toStrictEqual([]);
    const committed = advance(asked, 1);
    expect(committed.evidence[0]?.record?.status).toBe('refused');
    expect(statusAnswer(committed, 0)?.status).toBe('refused');
    // Module 1.1.0 answered at once, and wrongly.
    expect(statusAnswer(between, 0, 'status_running_between_refusal_writes')?.status).toBe('running');
  });

  it('takes the request lock before the execution lock, so a duplicate of a living job records nothing', () => {
    let s = delivered(delivered(start, 0), 0);
    const [first] = minionSteps(s, CONFIG).filter((step) => step.action === 'takes the request lock');
    s = (first as NonNullable<typeof first>).next;
    expect(s.jobs.map((job) => job.phase).sort()).toStrictEqual(['arrived', 'request_locked']);
    const duplicate = minionSteps(s, CONFIG).filter((step) => step.action.startsWith('finds the request lock held'));
    expect(duplicate).toHaveLength(1);
    const after = (duplicate[0] as (typeof duplicate)[number]).next;
    expect(after.jobs.map((job) => job.phase)).toStrictEqual(['request_locked']);
    expect(after.evidence).toStrictEqual(s.evidence);
    expect(after.messages).toStrictEqual([]);
  });
});
