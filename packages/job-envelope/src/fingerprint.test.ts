import { describe, expect, it } from 'vitest';
import { spec } from '../tests/support/fixtures.js';
import { compatibilityOf, resumeFingerprint, sha256Hex } from './fingerprint.js';
import { parseJobSpec } from './spec.js';

const fingerprintOf = (overrides: Parameters<typeof spec>[0] = {}): string => resumeFingerprint(compatibilityOf(parseJobSpec(spec(overrides))));

describe('the resume fingerprint', () => {
  it('is the SHA-256 of the canonical JSON of exactly the compatibility fields', () => {
    const fields = compatibilityOf(parseJobSpec(spec()));
    const expected = sha256Hex(
      `{"dry_run":false,"input_sha256":"${fields.input_sha256}","job_type":"rollout","schema_version":1,"spec_version":1,` +
        `"stage_ids":["alpha","beta","gamma"],"workspace_identity_sha256":"${sha256Hex('store:/var/lib/oduflow/master')}"}`,
    );
    expect(resumeFingerprint(fields)).toBe(expected);
  });

  it('stores the inputs and the workspace identity only as digests', () => {
    const fields = compatibilityOf(parseJobSpec(spec()));
    expect(JSON.stringify(fields)).not.toContain('client-0b7e4c8a');
    expect(JSON.stringify(fields)).not.toContain('/var/lib/oduflow');
    expect(fields.input_sha256).toBe(sha256Hex('{"profile":"configure","targets":["client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b"]}'));
  });

  it('does not depend on the key order of the inputs', () => {
    expect(fingerprintOf({ inputs: { b: 1, a: [1, 2] } })).toBe(fingerprintOf({ inputs: { a: [1, 2], b: 1 } }));
  });

  it.each([
    ['the job type', { job_type: 'migrate-store' }],
    ['the spec version', { spec_version: 2 }],
    ['the dry-run mode', { dry_run: true }],
    ['the inputs', { inputs: { profile: 'production', targets: ['client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b'] } }],
    ['the workspace identity', { workspace_identity: 'store:/srv/other' }],
    ['a stage inserted', { stage_ids: ['alpha', 'beta', 'delta', 'gamma'] }],
    ['a stage removed', { stage_ids: ['alpha', 'gamma'] }],
    ['two stages swapped', { stage_ids: ['alpha', 'gamma', 'beta'] }],
    ['a stage renamed', { stage_ids: ['alpha', 'beta', 'gamma2'] }],
  ])('changes when %s changes', (_what, overrides) => {
    expect(fingerprintOf(overrides)).not.toBe(fingerprintOf());
  });

  it('changes with the order of a list in the inputs', () => {
    expect(fingerprintOf({ inputs: { targets: ['b', 'a'] } })).not.toBe(fingerprintOf({ inputs: { targets: ['a', 'b'] } }));
  });

  it('changes with the schema version', () => {
    const fields = compatibilityOf(parseJobSpec(spec()));
    const other = { ...fields, schema_version: 2 } as unknown as typeof fields;
    expect(resumeFingerprint(other)).not.toBe(resumeFingerprint(fields));
  });
});
