import { describe, it } from 'vitest';
import { MASTER_SEQUENCES, masterSequence } from '../src/crash/master-sequences.js';
import { CRASH_TEST_TIMEOUT_MS, expectEveryCrashStateAllowed } from './support/crash-states.js';

/*
 * Crash-state enumeration of the master file store's writes (create, update,
 * migrate-store), traced in this process against master-runner's sources and
 * recovered by opening the store, reading it, publish-pending and a poll.
 */
describe('every crash state of the master file store', () => {
  it.each(MASTER_SEQUENCES.map((spec) => [spec.name, spec] as const))(
    '%s: opens, keeps invariant U and the JID, never republishes, never loses a result',
    async (_name, spec) => {
      await expectEveryCrashStateAllowed(masterSequence(spec));
    },
    CRASH_TEST_TIMEOUT_MS,
  );
});
