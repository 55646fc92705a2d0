import { isRequestId } from '@oduflow/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rolloutRequestId } from './request-id.js';

const uuid = fc.uuid({ version: [4, 7] }).map((u) => u.toLowerCase());

describe('rolloutRequestId', () => {
  it('derives a canonical version 8 request id that passes the protocol rule, the same every time', () => {
    fc.assert(
      fc.property(uuid, uuid, (rollout, minion) => {
        const id = rolloutRequestId(rollout, `client-${minion}`);
        expect(isRequestId(id)).toBe(true);
        expect(id[14]).toBe('8');
        expect('89ab').toContain(id[19]);
        expect(rolloutRequestId(rollout, `client-${minion}`)).toBe(id);
      }),
      { seed: 11, numRuns: 500 },
    );
  });

  it('gives every target of a rollout, and every rollout of a target, its own request id', () => {
    const rollout = '0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0b';
    const targets = Array.from({ length: 2_000 }, (_, i) => `client-0190e6a5-1c2d-7e3f-8a4b-${String(i).padStart(12, '0')}`);
    expect(new Set(targets.map((t) => rolloutRequestId(rollout, t))).size).toBe(targets.length);
    expect(rolloutRequestId(rollout, targets[0] as string)).not.toBe(rolloutRequestId('0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0c', targets[0] as string));
  });

  it('is pinned: a change of the derivation would orphan the requests of rollouts checkpointed before it', () => {
    expect(rolloutRequestId('0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0b', 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b')).toMatchInlineSnapshot(`"d9b0ce4d-b753-8e1c-997d-9ef3104a329c"`);
  });
});
