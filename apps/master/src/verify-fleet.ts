import { MasterRunnerError, verifyFleet, type FleetRow } from '@oduflow/master-runner';
import { isMinionId, isSha256Hex } from '@oduflow/protocol';
import { EXIT, type ExitCode } from './exit-codes.js';
import type { Row } from './output.js';
import type { CommandResult } from './commands.js';
import { withSalt, type Wiring } from './wiring.js';

/*
 * `oduflow-master verify-fleet`: live deployment verification, reported
 * apart from tests. One row per client minion from its own answer to
 * `oduflow_job.capabilities`. Exit 0 only when every minion is ready and
 * runs the reviewed module.
 *
 * The reviewed module is the `oduflow_job.py` shipped in
 * @oduflow/minion-wrapper at the version this master was built with: the
 * module and the master that expects it are released together, so the
 * default needs no copy of a digest that could go stale. `--expected-sha256`
 * overrides it (a fleet pinned to another reviewed build).
 */

export interface VerifyFleetFlags {
  readonly minion?: readonly string[];
  readonly expectedSha256?: string;
}

/** Statuses that are a finding about the minion; `no_answer` only says nothing is known yet. */
const REFUSED: ReadonlySet<FleetRow['status']> = new Set(['no_target', 'module_missing', 'older_module', 'invalid_capabilities', 'digest_differs', 'not_ready']);

async function reviewedSha256(): Promise<string> {
  try {
    // Loaded only when needed: the other commands never read the module asset.
    const { moduleSha256 } = await import('@oduflow/minion-wrapper');
    return moduleSha256();
  } catch (error) {
    throw new MasterRunnerError('config_invalid', 'cannot read the reviewed oduflow_job module of @oduflow/minion-wrapper; pass --expected-sha256', {
      detail: 'module_asset_unreadable',
      cause: error,
    });
  }
}

function expectedSha256(flag: string | undefined): Promise<string> {
  if (flag === undefined) return reviewedSha256();
  if (!isSha256Hex(flag)) {
    throw new MasterRunnerError('invalid_input', '--expected-sha256 must be 64 lowercase hex digits', { detail: 'invalid_expected_sha256' });
  }
  return Promise.resolve(flag);
}

function fleetRow(r: FleetRow): Row {
  return { ...r, reasons: r.reasons.length === 0 ? null : r.reasons.join(',') };
}

function exitFor(rows: readonly FleetRow[]): ExitCode {
  if (rows.some((r) => REFUSED.has(r.status))) return EXIT.refused;
  // Nothing verified is not "every minion ready": an empty fleet, or minions that did not answer.
  if (rows.length === 0 || rows.some((r) => r.status !== 'ready')) return EXIT.unresolved;
  return EXIT.ok;
}

export async function verifyFleetCommand(w: Wiring, flags: VerifyFleetFlags): Promise<CommandResult> {
  const minionIds = flags.minion ?? [];
  if (!minionIds.every(isMinionId)) {
    throw new MasterRunnerError('invalid_input', 'not a minion id (client-<uuid>)', { detail: 'invalid_minion_id' });
  }
  const expected = await expectedSha256(flags.expectedSha256);
  const result = await withSalt(w, (salt, callTimeoutMs) => verifyFleet({ salt, callTimeoutMs, logger: w.logger }, { minionIds, expectedSha256: expected }));
  if (result.outcome === 'unreachable') {
    return {
      report: { title: 'verify-fleet: salt-api did not answer', summary: { outcome: 'unreachable', failure: result.failure, expected_sha256: expected }, rows: [] },
      exitCode: EXIT.unresolved,
    };
  }
  const ready = result.rows.filter((r) => r.status === 'ready').length;
  const exitCode = exitFor(result.rows);
  return {
    report: {
      title: `verify-fleet: ${ready} of ${result.rows.length} minion(s) ready`,
      summary: { outcome: exitCode === EXIT.ok ? 'ready' : 'not_ready', minions: result.rows.length, ready, ignored_keys: result.ignored, expected_sha256: expected },
      rows: result.rows.map(fleetRow),
    },
    exitCode,
  };
}
