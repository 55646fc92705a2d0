import { MAX_STAGE_STATE_BYTES } from '@oduflow/job-envelope';
import { canonicalJson } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { MasterRunnerError } from '../errors.js';
import { MAX_DETAIL_LENGTH, type TargetRow } from './outcomes.js';
import { MAX_BATCH_SIZE } from './spec.js';
import { parseStageState, stateValue, type RolloutStageState } from './stage-state.js';

const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';

function worstRow(i: number): TargetRow {
  return {
    minion_id: `client-0190e6a5-1c2d-7e3f-8a4b-${String(i).padStart(12, '0')}`,
    request_id: REQUEST,
    outcome: 'quarantined',
    record_state: 'quarantined',
    reason: 'refused_after_running'.padEnd(64, 'x'),
    detail: `${'a'.repeat(63)},`.repeat(4).slice(0, MAX_DETAIL_LENGTH - 1) + 'b',
    blocked_by: REQUEST,
    passed: Number.MAX_SAFE_INTEGER,
    total: Number.MAX_SAFE_INTEGER,
  };
}

function state(targets: readonly TargetRow[]): RolloutStageState {
  return { version: 1, profile: 'volume_resize', target_count: 100_000, batch_size: MAX_BATCH_SIZE, max_unresolved: Number.MAX_SAFE_INTEGER, targets, budget_used: Number.MAX_SAFE_INTEGER };
}

function refusalOf(action: () => unknown): MasterRunnerError {
  try {
    action();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('a rollout stage state', () => {
  it('fits the envelope for a full batch with every field at its longest', () => {
    const full = state(Array.from({ length: MAX_BATCH_SIZE }, (_, i) => worstRow(i)));
    expect(parseStageState(stateValue(full), 'batch-00001')).toEqual(full);
    expect(Buffer.byteLength(canonicalJson(stateValue(full)), 'utf8')).toBeLessThan(MAX_STAGE_STATE_BYTES);
  });

  it('is built with its keys in canonical order, so the native serializer already writes its canonical text', () => {
    const value = stateValue(state([worstRow(0), worstRow(1)]));
    expect(JSON.stringify(value)).toBe(canonicalJson(value));
  });

  it.each<[string, (row: Record<string, unknown>) => void]>([
    ['free text as a reason', (row) => void (row['reason'] = 'connection failed: password=x')],
    ['a path as a detail', (row) => void (row['detail'] = '/etc/shadow')],
    ['a detail over the limit', (row) => void (row['detail'] = 'a'.repeat(MAX_DETAIL_LENGTH + 1))],
    ['a field the rollout never writes', (row) => void (row['message'] = 'hello')],
    ['an outcome that is no outcome', (row) => void (row['outcome'] = 'done')],
    ['a request id that is not canonical', (row) => void (row['request_id'] = REQUEST.toUpperCase())],
  ])('is refused as a corrupt checkpoint when a row holds %s, naming the field but not the value', (_what, tamper) => {
    const value = stateValue(state([worstRow(0)])) as { targets: Record<string, unknown>[] };
    tamper(value.targets[0] as Record<string, unknown>);
    const error = refusalOf(() => parseStageState(value as never, 'batch-00007'));
    expect([error.code, error.detail]).toEqual(['rollout_refused', 'corrupt_checkpoint']);
    expect(error.message).toMatch(/^the checkpoint of stage batch-00007 is not a rollout stage state/);
    expect(error.message).not.toMatch(/password|shadow|hello/);
  });
});
