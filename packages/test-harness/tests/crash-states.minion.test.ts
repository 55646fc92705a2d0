import { describe, expect, it } from 'vitest';
import { MINION_SEQUENCES, minionSequence } from '../src/crash/minion-sequences.js';
import { CRASH_TEST_TIMEOUT_MS, expectEveryCrashStateAllowed } from './support/crash-states.js';

/*
 * Crash-state enumeration of oduflow_job.py's store writes (claim, receipt,
 * refusal records): every crash state the conservative persistence model
 * allows, built as a real store, recovered by the module's own status and a
 * later run delivery of the same JID (src/crash/, python/crash_states_helper.py).
 */
describe('every crash state of the minion module', () => {
  it.each(MINION_SEQUENCES.map((spec) => [spec.name, spec] as const))(
    '%s: gives an allowed status, never a second execution, never a lost receipt',
    async (_name, spec) => {
      const report = await expectEveryCrashStateAllowed(minionSequence(spec));
      // The recorded run reached its final answer: the sequence covers the whole commit.
      expect(Object.keys(report.outcomes).some((label) => label === 'receipt' || label === 'refused' || label === 'unknown')).toBe(true);
    },
    CRASH_TEST_TIMEOUT_MS,
  );
});
