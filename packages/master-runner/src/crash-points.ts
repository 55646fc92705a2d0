/*
 * Test seam for the durable boundaries of DESIGN §6. When the environment
 * variable ODUFLOW_TEST_CRASH_AT names a point, the process SIGKILLs itself
 * there, so crash tests run the real CLI and observe what a power cut or an
 * OOM kill would leave. When the variable is unset (always, in operation)
 * nothing happens; it is read only at the boundary itself.
 *
 *   P1  record persisted (prepared), publish intent not yet persisted
 *   P2  intent persisted (publishing), Salt not yet called
 *   P3  Salt publish call returned, its outcome not yet recorded
 *   P4  status answer fetched, not yet committed
 *
 * Inside the file store (FileRecordStoreOptions.crashAt, MigrateFileStoreOptions.crashAt):
 *
 *   S1  create: JID reserved (jids/<jid>.json), target index entry not yet written
 *   S2  create: target index entry written (targets/<minion>/<id>.json), unresolved entry not yet
 *   S3  create: every index entry written (unresolved/<minion>/<id>.json when it blocks), record not yet
 *   S4  update: record written, the unresolved entry of a record that stopped blocking not yet removed
 *   S5  migrate-store: one more record indexed (reached once per record), format marker not yet written
 *   S6  migrate-store: indexes complete and stale entries removed, format marker not yet written
 */
export const CRASH_POINTS = ['P1', 'P2', 'P3', 'P4'] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

export const STORE_CRASH_POINTS = ['S1', 'S2', 'S3', 'S4', 'S5', 'S6'] as const;
export type StoreCrashPoint = (typeof STORE_CRASH_POINTS)[number];

export const CRASH_ENV = 'ODUFLOW_TEST_CRASH_AT';

/** Kills this process with SIGKILL when ODUFLOW_TEST_CRASH_AT names `point`. */
export function crashIfRequested(point: CrashPoint | StoreCrashPoint): void {
  const requested = process.env[CRASH_ENV];
  if (requested === undefined || requested !== point) return;
  process.kill(process.pid, 'SIGKILL');
}
