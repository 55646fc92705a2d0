import { canonicalJson } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { validateDispatchInput } from './dispatch-input.js';
import { MasterRunnerError } from './errors.js';

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';
const generated = () => REQUEST;

function refusal(fn: () => unknown): { code: string; detail: string | undefined; message: string } {
  try {
    fn();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return { code: error.code, detail: error.detail, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('validateDispatchInput', () => {
  it('accepts a fixed profile without state data and binds an empty digest', () => {
    expect(validateDispatchInput({ minionId: MINION, profile: 'configure' }, generated)).toEqual({
      requestId: REQUEST,
      minionId: MINION,
      profile: 'configure',
      stateDataJson: '',
      stateDigest: '',
    });
  });

  it('binds custom high data by the SHA-256 of its canonical text', () => {
    const text = canonicalJson({ motd: { 'file.managed': [{ name: '/etc/motd' }, { contents: 'hi' }] } });
    const valid = validateDispatchInput({ minionId: MINION, profile: 'custom', stateDataJson: text }, generated);
    expect(valid.stateDigest).toMatch(/^[0-9a-f]{64}$/);
    expect(valid.stateDataJson).toBe(text);
  });

  it.each([
    [{ minionId: MINION, profile: 'configure', requestId: 'not-a-uuid' }, 'invalid_request_id'],
    [{ minionId: MINION, profile: 'configure', requestId: REQUEST.toUpperCase() }, 'invalid_request_id'],
    [{ minionId: 'client-nope', profile: 'configure' }, 'invalid_minion_id'],
    [{ minionId: `${MINION}\n`, profile: 'configure' }, 'invalid_minion_id'],
    [{ minionId: MINION, profile: 'highstate' }, 'invalid_profile'],
    [{ minionId: MINION, profile: 'configure', stateDataJson: '{}' }, 'invalid_high_data'],
    [{ minionId: MINION, profile: 'custom' }, 'invalid_high_data'],
    [{ minionId: MINION, profile: 'custom', stateDataJson: '{"a": 1}' }, 'non_canonical_json'],
    [{ minionId: MINION, profile: 'custom', stateDataJson: '{"a":{"__env__":["x"]}}' }, 'forbidden_key'],
  ])('refuses %j with invalid_input naming %s', (input, detail) => {
    const r = refusal(() => validateDispatchInput(input, generated));
    expect(r.code).toBe('invalid_input');
    expect(r.detail).toBe(detail);
  });

  it('never echoes the state data in its refusal', () => {
    const secret = 'hunter2-very-secret';
    const r = refusal(() =>
      validateDispatchInput({ minionId: MINION, profile: 'custom', stateDataJson: `{"a":{"b":[{"password": "${secret}"}]}}` }, generated),
    );
    expect(r.message).not.toContain(secret);
  });
});
