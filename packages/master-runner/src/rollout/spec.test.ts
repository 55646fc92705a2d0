import { stateDigest } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { MasterRunnerError } from '../errors.js';
import { MAX_BATCH_SIZE, parseRolloutSpec, rolloutJobSpec, type RolloutInput } from './spec.js';

const A = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const B = 'client-1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f';
const C = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';

function refusal(input: RolloutInput): { code: string; detail: unknown; message: string } {
  try {
    parseRolloutSpec(input);
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return { code: error.code, detail: error.detail, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('parseRolloutSpec', () => {
  it('sorts the targets by code unit, drops duplicates and cuts them into batches with stage ids', () => {
    const spec = parseRolloutSpec({ profile: 'configure', targets: [C, A, B, A, C], batchSize: 2 });
    expect(spec.targets).toEqual([A, B, C]);
    expect(spec.duplicates).toBe(2);
    expect(spec.batches).toEqual([[A, B], [C]]);
    expect(spec.stageIds).toEqual(['batch-00001', 'batch-00002']);
    expect(spec).toMatchObject({ maxUnresolved: 0, dryRun: false, stateDataJson: '', stateDigest: '' });
    expect(Object.isFrozen(spec.targets)).toBe(true);
  });

  it('puts every input that decides what the rollout does into the job inputs, and the state data only as its digest', () => {
    const text = '{"marker":{"file.touch":[{"name":"/tmp/x"}]}}';
    const spec = parseRolloutSpec({ profile: 'custom', targets: [B, A], batchSize: 5, maxUnresolved: 3, dryRun: true, stateDataJson: text });
    const job = rolloutJobSpec(spec, 'record-store:/var/lib/oduflow/master');
    expect(job).toEqual({
      job_type: 'rollout',
      spec_version: 1,
      dry_run: true,
      inputs: { profile: 'custom', state_digest: stateDigest(text), targets: [A, B], batch_size: 5, max_unresolved: 3 },
      stage_ids: ['batch-00001'],
      workspace_identity: 'record-store:/var/lib/oduflow/master',
    });
    expect(JSON.stringify(job)).not.toContain('file.touch');
  });

  it('names a bad target by its position, never by its value', () => {
    const bad = refusal({ profile: 'configure', targets: [A, 'client-NOT-A-UUID password=hunter2'] });
    expect(bad).toMatchObject({ code: 'invalid_input', detail: 'invalid_minion_id', message: 'target 2 is not a minion id (client-<uuid>)' });
    expect(bad.message).not.toContain('hunter2');
  });

  it.each<[string, RolloutInput, string]>([
    ['no target', { profile: 'configure', targets: [] }, 'no_targets'],
    ['an unknown profile', { profile: 'reboot', targets: [A] }, 'invalid_profile'],
    ['custom without state data', { profile: 'custom', targets: [A] }, 'invalid_high_data'],
    ['state data with a fixed role', { profile: 'configure', targets: [A], stateDataJson: '{"a":{"b.c":[]}}' }, 'invalid_high_data'],
    ['state data that is not canonical', { profile: 'custom', targets: [A], stateDataJson: '{ "a": 1 }' }, 'non_canonical_json'],
    ['a batch of zero', { profile: 'configure', targets: [A], batchSize: 0 }, 'invalid_batch_size'],
    ['a batch over the limit', { profile: 'configure', targets: [A], batchSize: MAX_BATCH_SIZE + 1 }, 'invalid_batch_size'],
    ['a fractional batch', { profile: 'configure', targets: [A], batchSize: 1.5 }, 'invalid_batch_size'],
    ['a negative budget', { profile: 'configure', targets: [A], maxUnresolved: -1 }, 'invalid_budget'],
  ])('refuses %s before anything runs', (_what, input, detail) => {
    expect(refusal(input)).toMatchObject({ code: 'invalid_input', detail });
  });

  it('refuses a rollout that would need more than 10 000 stages', () => {
    const targets = Array.from({ length: 10_001 }, (_, i) => `client-0190e6a5-1c2d-7e3f-8a4b-${String(i).padStart(12, '0')}`);
    expect(refusal({ profile: 'configure', targets, batchSize: 1 })).toMatchObject({ detail: 'invalid_batch_size' });
    expect(parseRolloutSpec({ profile: 'configure', targets, batchSize: 2 }).stageIds).toHaveLength(5_001);
  });
});
