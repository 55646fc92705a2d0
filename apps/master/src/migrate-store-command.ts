import { migrateFileRecordStore } from '@oduflow/master-runner';
import type { CommandResult } from './commands.js';
import { fileStoreRoot, storeConfig } from './config.js';
import { EXIT } from './exit-codes.js';
import type { Wiring } from './wiring.js';

/*
 * `oduflow-master migrate-store`: the one-shot step that brings a store
 * written by an older release to this release's format (and, run again,
 * re-checks and repairs its indexes). It creates no store: a missing one is
 * not_found. Stop every other oduflow-master on the store first; the library
 * holds the store lock while it runs.
 */
export async function migrateStoreCommand(w: Wiring): Promise<CommandResult> {
  const report = await migrateFileRecordStore({ root: fileStoreRoot(storeConfig(w.flags, w.env), 'migrate-store', 'oduflow-master migrate') });
  const { location, ...counts } = report;
  w.logger.info(counts, 'record store migrated');
  return {
    report: {
      title: report.wasCurrent ? `migrate-store: ${location} was current; indexes re-checked` : `migrate-store: ${location} migrated`,
      summary: { outcome: report.wasCurrent ? 'rechecked' : 'migrated', store: location, ...counts },
    },
    exitCode: EXIT.ok,
  };
}
