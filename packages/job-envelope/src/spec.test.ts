import { describe, expect, it } from 'vitest';
import { codeOf, spec } from '../tests/support/fixtures.js';
import { JobEnvelopeError } from './errors.js';
import { MAX_INPUT_BYTES } from './limits.js';
import { parseJobSpec } from './spec.js';

function messageOf(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    if (JobEnvelopeError.isInstance(error)) return error.message;
    throw error;
  }
  throw new Error('nothing was thrown');
}

describe('parseJobSpec', () => {
  it('returns a deeply frozen copy that later changes by the caller cannot reach', () => {
    const input = spec();
    const parsed = parseJobSpec(input);
    input.stage_ids.push('delta');
    (input.inputs as { profile: string }).profile = 'production';
    expect(parsed.stage_ids).toEqual(['alpha', 'beta', 'gamma']);
    expect(parsed.inputs).toEqual({ profile: 'configure', targets: ['client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b'] });
    expect(Object.isFrozen(parsed)).toBe(true);
    expect(Object.isFrozen(parsed.stage_ids)).toBe(true);
    expect(Object.isFrozen((parsed.inputs as { targets: unknown }).targets)).toBe(true);
  });

  it.each([
    ['a job type that is not one lowercase file-name component', { job_type: '../rollout' }],
    ['an upper-case job type', { job_type: 'Rollout' }],
    ['a spec version that is not a positive integer', { spec_version: 1.5 }],
    ['a spec version of zero', { spec_version: 0 }],
    ['a dry-run flag that is not a boolean', { dry_run: 'no' }],
    ['inputs outside canonical JSON (a fraction)', { inputs: { ratio: 0.5 } }],
    ['inputs outside canonical JSON (undefined)', { inputs: { x: undefined } }],
    ['no stages', { stage_ids: [] }],
    ['a stage id listed twice', { stage_ids: ['alpha', 'beta', 'alpha'] }],
    ['a stage id with a space', { stage_ids: ['alpha beta'] }],
    ['a stage id with a slash', { stage_ids: ['a/b'] }],
    ['an empty workspace identity', { workspace_identity: '' }],
    ['an unknown field', { extra: true }],
  ])('refuses %s with invalid_spec', async (_what, overrides) => {
    expect(await codeOf(() => parseJobSpec({ ...spec(), ...overrides }))).toBe('invalid_spec');
  });

  it('refuses inputs whose every property access throws, with invalid_spec', async () => {
    const hostile = new Proxy({}, { get: () => { throw new Error('boom'); }, ownKeys: () => { throw new Error('boom'); } });
    expect(await codeOf(() => parseJobSpec(spec({ inputs: hostile as never })))).toBe('invalid_spec');
  });

  it('refuses inputs over the size limit', async () => {
    const big = 'x'.repeat(MAX_INPUT_BYTES);
    expect(await codeOf(() => parseJobSpec(spec({ inputs: [big] })))).toBe('invalid_spec');
  });

  it('never echoes a value or an unknown key in its message', () => {
    const secret = 'hunter2-SECRET';
    const messages = [
      messageOf(() => parseJobSpec({ ...spec(), [secret]: 1 })),
      messageOf(() => parseJobSpec(spec({ job_type: secret }))),
      messageOf(() => parseJobSpec(spec({ stage_ids: [`${secret} x`] }))),
      messageOf(() => parseJobSpec(spec({ inputs: { [secret]: 0.5 } }))),
    ];
    for (const message of messages) expect(message).not.toContain('hunter2');
    expect(messages[1]).toContain('job_type');
  });
});
