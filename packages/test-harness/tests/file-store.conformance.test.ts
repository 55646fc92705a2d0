import { createFileRecordStore } from '@oduflow/master-runner';
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
  const store = await createFileRecordStore({ root: join(dir, 'store'), lockWaitMs: 10_000 });
  return {
    store,
    dispose: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
