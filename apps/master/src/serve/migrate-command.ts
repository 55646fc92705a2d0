import type { CommandResult } from '../commands.js';
import { storeConfig } from '../config.js';
import { EXIT } from '../exit-codes.js';
import { MasterRunnerError } from '@oduflow/master-runner';
import type { Wiring } from '../wiring.js';

/*
 * `oduflow-master migrate`: brings a PostgreSQL store's schema to this
 * release (idempotent, under the library's advisory lock, each migration in
 * its own transaction). Run it once before the first `serve` and after each
 * upgrade; a service refuses a schema that is not current.
 */
export async function migrateCommand(w: Wiring): Promise<CommandResult> {
  const config = storeConfig(w.flags, w.env);
  if (config.kind !== 'postgres') {
    throw new MasterRunnerError('config_invalid', 'migrate is for a postgres:// store; a file store is brought up to date by migrate-store');
  }
  const { migratePostgres } = await import('@oduflow/master-runner/postgres');
  const { kind: _kind, ...options } = config;
  const { from, to } = await migratePostgres(options);
  w.logger.info({ from, to }, 'PostgreSQL schema migrated');
  return {
    report: {
      title: from === to ? `migrate: schema version ${to} was current` : `migrate: schema version ${from} → ${to}`,
      summary: { outcome: from === to ? 'current' : 'migrated', from, to },
    },
    exitCode: EXIT.ok,
  };
}
