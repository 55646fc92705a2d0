import { createFileRecordStore } from '@oduflow/master-runner';
import { expect } from 'vitest';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runRecordStoreConformance } from '../src/store-conformance.js';

/*
 * The embedded file store against the shared store contract. This run lives
 * in test-harness (which depends on master-runner), not in master-runner's own
 * tests, so the dependency still points one way.
 */
runRecordStoreConformance('file store', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-conformance-'));
  chmodSync(dir, 0o700);
  const root = join(dir, 'store');
  const store = await createFileRecordStore({ root, lockWaitMs: 10_000 });
  return {
    store,
    // The real create path of a second store on the same directory, stopped at
    // S3 (JID and every index entry written, record not) as a SIGKILL there would.
    interruptCreate: async (record) => {
      const interrupted = new Error('interrupted at S3');
      const other = await createFileRecordStore({
        root,
        lockWaitMs: 10_000,
        crashAt: (point) => {
          if (point === 'S3') throw interrupted;
        },
      });
      try {
        await expect(other.withTarget(record.minion_id, (unit) => unit.create(record))).rejects.toBe(interrupted);
      } finally {
        await other.close();
      }
    },
    dispose: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
