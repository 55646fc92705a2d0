import type { MasterRunnerErrorCode } from '@oduflow/master-runner';

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
});

