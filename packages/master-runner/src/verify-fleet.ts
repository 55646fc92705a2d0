import {
  isMinionId,
  isSemver,
  isSha256Hex,
  type Capabilities,
  type ReadinessReason,
  type TransportFailure,
} from '@oduflow/protocol';
import { readCapabilityAnswer } from './capability.js';
import { DEFAULT_CALL_TIMEOUT_MS } from './deps.js';
import { MasterRunnerError } from './errors.js';
import { silentLogger, type Logger } from './logger.js';
import { isPlainObject } from './plain-object.js';
import type { FleetAnswer, FleetTarget, SaltFleetClient } from './salt-client.js';

/*
 * Live deployment verification (seed: "reported separately"): asks every
 * client minion, or the named ones, for `oduflow_job.capabilities` through
 * salt-api and says, per minion, whether a new request could be published to
 * it and whether it runs the reviewed module. Read-only: it records nothing
 * and publishes nothing. What it proves is the minion's answer at that
 * moment, not that a receipt will survive a real transport failure.
 */

/** Minion ids the fleet is made of: Salt's glob over accepted keys, filtered to canonical `client-<uuid>` ids. */
export const FLEET_GLOB = 'client-*';

/** One word per minion, most serious first when several apply. */
export const FLEET_STATUSES = [
  /** An accepted minion that did not return within the timeout (stopped, disconnected, busy). */
  'no_answer',
  /** A named minion without an accepted key on this master. */
  'no_target',
  /** The minion answered, but not from oduflow_job (module not installed, not loaded, or failing). */
  'module_missing',
  /** The answer of a module older than 1.1.0 (no readiness): never published to. */
  'older_module',
  /** An answer that is not a capabilities answer of any version this master knows. */
  'invalid_capabilities',
  /** A 1.1.0 answer, but the module it loaded is not the reviewed asset. */
  'digest_differs',
  /** A 1.1.0 answer of the reviewed module, not ready for the reasons listed. */
  'not_ready',
  /** The reviewed module, on the pinned Salt, ready. */
  'ready',
] as const;
export type FleetStatus = (typeof FLEET_STATUSES)[number];

export interface FleetRow {
  readonly minion_id: string;
  readonly status: FleetStatus;
  /** Shown only when the minion gave a valid one. */
  readonly module_version: string | null;
  readonly salt_version: string | null;
  readonly module_sha256: string | null;
  /** Readiness reasons (the minion's, plus `salt_version` when it is not the pinned one). */
  readonly reasons: readonly ReadinessReason[];
}

export type FleetResult =
  | {
      readonly outcome: 'verified';
      readonly rows: readonly FleetRow[];
      /** Accepted keys the glob matched that are not canonical client ids: not part of the fleet, not shown. */
      readonly ignored: number;
    }
  /** The fleet call itself failed: nothing is known about any minion. */
  | { readonly outcome: 'unreachable'; readonly failure: TransportFailure };

export interface VerifyFleetDeps {
  readonly salt: SaltFleetClient;
  readonly callTimeoutMs?: number;
  readonly logger?: Logger;
}

export interface VerifyFleetOptions {
  /** Only these minions (each a canonical `client-<uuid>`); every accepted client minion otherwise. */
  readonly minionIds?: readonly string[];
  /** The SHA-256 of the reviewed `oduflow_job.py` the fleet must run. */
  readonly expectedSha256: string;
}

/** The module version an unreadable answer names, when it is a valid one (never other text from it). */
function versionIn(ret: unknown): string | null {
  const version = isPlainObject(ret) ? ret['module_version'] : undefined;
  return isSemver(version) ? version : null;
}

function row(minionId: string, status: FleetStatus, facts: Partial<Omit<FleetRow, 'minion_id' | 'status'>> = {}): FleetRow {
  return { minion_id: minionId, status, module_version: null, salt_version: null, module_sha256: null, reasons: [], ...facts };
}

/**
 * A Salt version as releases spell it (`3006.27`, `3006.0rc1`, `3006.9+1.gabc`).
 * The protocol takes any text there (the verdict refuses anything but the
 * pinned one); a table only shows text of this shape, never a control
 * character a minion sent.
 */
const SHOWN_SALT_VERSION = /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$/;

function capabilitiesRow(minionId: string, c: Capabilities, reasons: readonly ReadinessReason[], expectedSha256: string): FleetRow {
  const salt_version = SHOWN_SALT_VERSION.test(c.salt_version) ? c.salt_version : null;
  const facts = { module_version: c.module_version, salt_version, module_sha256: c.module_sha256, reasons };
  if (c.module_sha256 !== expectedSha256) return row(minionId, 'digest_differs', facts);
  return row(minionId, reasons.length === 0 ? 'ready' : 'not_ready', facts);
}

function classify(minionId: string, answer: FleetAnswer, expectedSha256: string): FleetRow {
  if (answer.kind === 'no_return') return row(minionId, 'no_answer');
  if (answer.kind === 'malformed') return row(minionId, 'invalid_capabilities');
  const reading = readCapabilityAnswer(answer.retcode, answer.ret);
  switch (reading.kind) {
    case 'module_missing':
      return row(minionId, 'module_missing');
    case 'older_module':
      return row(minionId, 'older_module', { module_version: reading.moduleVersion });
    case 'invalid':
      return row(minionId, 'invalid_capabilities', { module_version: versionIn(answer.ret) });
    case 'capabilities':
      return capabilitiesRow(minionId, reading.capabilities, reading.verdict.ready ? [] : reading.verdict.reasons, expectedSha256);
  }
}

function validate(options: VerifyFleetOptions): { readonly target: FleetTarget; readonly named: readonly string[] | undefined } {
  if (!isSha256Hex(options.expectedSha256)) {
    throw new MasterRunnerError('invalid_input', 'the expected module digest must be 64 lowercase hex digits', { detail: 'invalid_expected_sha256' });
  }
  if (options.minionIds === undefined || options.minionIds.length === 0) return { target: { glob: FLEET_GLOB }, named: undefined };
  if (!options.minionIds.every(isMinionId)) {
    throw new MasterRunnerError('invalid_input', 'every minion must be "client-" followed by a lowercase RFC 9562 UUID', { detail: 'invalid_minion_id' });
  }
  const named = [...new Set(options.minionIds)].sort();
  return { target: { list: named }, named };
}

/**
 * One row per minion, in minion-id order. With named minions, each gets a
 * row (`no_target` when the master has no accepted key for it); without,
 * every accepted `client-<uuid>` key does, `no_answer` for those that did not
 * return. Throws `invalid_input` for a bad id or digest; every Salt outcome
 * is a result.
 */
export async function verifyFleet(deps: VerifyFleetDeps, options: VerifyFleetOptions): Promise<FleetResult> {
  const { target, named } = validate(options);
  const log = (deps.logger ?? silentLogger()).child({ command: 'verify-fleet' });
  const outcome = await deps.salt.callFleet(target, 'oduflow_job.capabilities', [], deps.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS);
  if (outcome.kind === 'failed') {
    log.warn({ failure: outcome.reason }, 'the fleet capability call failed');
    return { outcome: 'unreachable', failure: outcome.reason };
  }
  const ids = named ?? [...outcome.answers.keys()].filter(isMinionId).sort();
  const ignored = named === undefined ? outcome.answers.size - ids.length : 0;
  const rows = ids.map((id) => {
    const answer = outcome.answers.get(id);
    return answer === undefined ? row(id, 'no_target') : classify(id, answer, options.expectedSha256);
  });
  for (const r of rows) log.info({ minion_id: r.minion_id, status: r.status, reasons: r.reasons }, 'minion verified');
  return { outcome: 'verified', rows, ignored };
}
