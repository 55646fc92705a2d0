import type { MasterRunnerErrorCode, RolloutReport, TargetOutcome } from '@oduflow/master-runner';

/*
 * The one table from outcomes to exit statuses. Scripts branch on these:
 *   0  done, nothing left unresolved by this command
 *   1  internal failure (store I/O, a bug): retrying may help, nothing was decided
 *   2  refused or blocked: bad input, a blocked target, insecure credentials
 *   3  unknown or unresolved: the request may have run (poll it or reconcile
 *      it), or nothing could be decided yet (a minion that did not answer)
 *   4  busy: `serve` found another serve running on the same file store
 *      (or migrate-store running on it); a supervisor should not restart it
 */
export const EXIT = Object.freeze({ ok: 0, internal: 1, refused: 2, unresolved: 3, busy: 4 });
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/*
 * A rollout that ran ends with the status of its worst target: 3 when any
 * target failed, may have run without a receipt, is still open, or could
 * not be asked (or the budget halted the rollout); else 2 when any target
 * was refused without being applied (blocked, rejected, no key); else 0.
 * A stage stopped by an error (the store, a bug) is 1: resume it once fixed.
 */
export const EXIT_FOR_ROLLOUT_OUTCOME: Readonly<Record<TargetOutcome, ExitCode>> = Object.freeze({
  succeeded: EXIT.ok,
  reconciled: EXIT.ok,
  skipped: EXIT.ok,
  blocked: EXIT.refused,
  rejected: EXIT.refused,
  no_target: EXIT.refused,
  failed: EXIT.unresolved,
  unknown: EXIT.unresolved,
  quarantined: EXIT.unresolved,
  unresolved: EXIT.unresolved,
  unreachable: EXIT.unresolved,
  pending: EXIT.unresolved,
});

export function exitForRollout(report: Pick<RolloutReport, 'halted' | 'status' | 'targets'>): ExitCode {
  if (report.halted === 'stage_exception') return EXIT.internal;
  const codes = new Set<ExitCode>(report.targets.map((t) => EXIT_FOR_ROLLOUT_OUTCOME[t.outcome]));
  if (report.status !== 'succeeded' || codes.has(EXIT.unresolved)) return EXIT.unresolved;
  return codes.has(EXIT.refused) ? EXIT.refused : EXIT.ok;
}

export const EXIT_FOR_ERROR: Readonly<Record<MasterRunnerErrorCode | 'usage', ExitCode>> = Object.freeze({
  usage: EXIT.refused,
  invalid_input: EXIT.refused,
  target_blocked: EXIT.refused,
  request_conflict: EXIT.refused,
  not_found: EXIT.refused,
  illegal_transition: EXIT.refused,
  store_unsafe: EXIT.refused,
  store_format: EXIT.refused,
  credentials_insecure: EXIT.refused,
  credentials_unreadable: EXIT.refused,
  config_invalid: EXIT.refused,
  store_corrupt: EXIT.internal,
  store_busy: EXIT.internal,
  store_io: EXIT.internal,
  internal: EXIT.internal,
  // Nothing was recorded and nothing is known yet: try again later.
  minion_unreachable: EXIT.unresolved,
  no_target: EXIT.refused,
  // Another rollout holds the workspace, no such run, a resume of another job or of a damaged checkpoint: nothing ran.
  rollout_refused: EXIT.refused,
  rollout_io: EXIT.internal,
  // Stopped before its end by its caller (the CLI never stops one this way): resume it, like a rollout_io.
  rollout_interrupted: EXIT.internal,
});

