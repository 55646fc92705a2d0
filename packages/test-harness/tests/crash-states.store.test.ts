import { describe, it } from 'vitest';
import { STORE_SEQUENCES, storeSequence } from '../src/crash/store-sequences.js';
import { CRASH_TEST_TIMEOUT_MS, expectEveryCrashStateAllowed } from './support/crash-states.js';

/* Crash-state enumeration of receipt-store's atomic write and remove (its sources, traced in this process). */
describe('every crash state of a receipt-store write', () => {
  it.each(STORE_SEQUENCES.map((spec) => [spec.name, spec] as const))(
    '%s: a reader finds the old or the new content, and the new one once the call returned',
    async (_name, spec) => {
      await expectEveryCrashStateAllowed(storeSequence(spec));
    },
    CRASH_TEST_TIMEOUT_MS,
  );
});
