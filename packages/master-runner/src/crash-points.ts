/*
 * The durable boundaries of DESIGN §6 on the master side, named for crash
 * tests. The seam is a function the caller injects (MasterDeps.crashAt, and
 * the file store's own crashAt option); nothing arms it from outside: the
 * default does nothing and reads no environment, so a production process can
 * never be made to kill itself. The crash tests run a test-only entry
 * (apps/master/tests/support/crash-cli.ts) that injects a function which
 * SIGKILLs its own process at the named point.
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
 *   S7  create with an outbox entry: entry written (outbox/<id>.json), record not yet
 *   S8  create with an Idempotency-Key: record written, key not yet marked bound (keys/<hash>.json still `claimed`)
 */
export const CRASH_POINTS = ['P1', 'P2', 'P3', 'P4'] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

export const STORE_CRASH_POINTS = ['S1', 'S2', 'S3', 'S4', 'S5', 'S6', 'S7', 'S8'] as const;
export type StoreCrashPoint = (typeof STORE_CRASH_POINTS)[number];

/** The seam's default everywhere: nothing happens at any boundary. */
export function noCrash(_point: CrashPoint | StoreCrashPoint): void {
  // Deliberately empty: only a test injects a seam that acts.
}
