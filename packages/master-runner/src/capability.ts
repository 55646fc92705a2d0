import {
  READINESS_MODULE_VERSION,
  capabilityVerdict,
  isSemver,
  parseCapabilities,
  type CallFailure,
  type Capabilities,
  type CapabilityRejection,
  type CapabilityVerdict,
} from '@oduflow/protocol';
import type { ResolvedDeps } from './deps.js';
import type { CallOutcome } from './salt-client.js';
import { isPlainObject } from './plain-object.js';

/*
 * A new request is published only to a minion that proves, in its own
 * answer, that it runs module 1.1.0 on the pinned Salt and is ready to
 * execute: otherwise an older client would run the state without writing a
 * receipt, or a client that cannot execute safely would refuse it after
 * publication. What the minion answered is evidence (recorded as a
 * rejection); a call that got no answer is not, and proves nothing about
 * the request, so it records nothing.
 */

/** What one minion's answer to `oduflow_job.capabilities` says (shared by dispatch and verify-fleet). */
export type CapabilityReading =
  /** A module 1.1.0 answer, with the master's verdict on it. */
  | { readonly kind: 'capabilities'; readonly capabilities: Capabilities; readonly verdict: CapabilityVerdict }
  /** A Salt-level answer (function not available, `__virtual__` false, a traceback): the module is not there. */
  | { readonly kind: 'module_missing' }
  /** The answer of a module older than 1.1.0, with the (semver) version it gave. */
  | { readonly kind: 'older_module'; readonly moduleVersion: string }
  /** An object that is not a capabilities answer of any version this master knows. */
  | { readonly kind: 'invalid' };


/** major.minor.patch of a semver, as numbers (pre-release and build ignored). */
function core(version: string): [number, number, number] {
  const [major = 0, minor = 0, patch = 0] = version.split(/[-+]/)[0]?.split('.').map(Number) ?? [];
  return [major, minor, patch];
}

function isBefore(version: string, than: string): boolean {
  const [a, b] = [core(version), core(than)];
  for (let i = 0; i < 3; i += 1) if ((a[i] as number) !== (b[i] as number)) return (a[i] as number) < (b[i] as number);
  return false;
}

export function readCapabilityAnswer(retcode: number, ret: unknown): CapabilityReading {
  if (retcode !== 0) return { kind: 'module_missing' };
  try {
    const capabilities = parseCapabilities(ret);
    return { kind: 'capabilities', capabilities, verdict: capabilityVerdict(capabilities) };
  } catch {
    // An older module still answers an object with its semver version; anything else is no answer we know.
    const version = isPlainObject(ret) ? ret['module_version'] : undefined;
    if (isSemver(version) && isBefore(version, READINESS_MODULE_VERSION)) return { kind: 'older_module', moduleVersion: version };
    return { kind: 'invalid' };
  }
}

export type CapabilityCheck =
  /** Ready: the request may be published. */
  | { readonly kind: 'ready'; readonly capabilities: Capabilities }
  /** The minion answered, and the answer rules publication out: recorded as `rejected`. */
  | { readonly kind: 'rejected'; readonly rejection: CapabilityRejection }
  /** No answer came back (transport, timeout, no return): nothing is recorded, the request id stays usable. */
  | { readonly kind: 'unreachable'; readonly failure: Exclude<CallFailure, 'no_target'> }
  /** No accepted minion key matched: nothing is recorded, the request id stays usable. */
  | { readonly kind: 'no_target' };

function fromAnswer(reading: CapabilityReading): CapabilityCheck {
  switch (reading.kind) {
    case 'capabilities':
      return reading.verdict.ready
        ? { kind: 'ready', capabilities: reading.capabilities }
        : { kind: 'rejected', rejection: { code: 'not_ready', readiness: reading.verdict.reasons } };
    case 'module_missing':
      return { kind: 'rejected', rejection: { code: 'capability_missing' } };
    case 'older_module':
    case 'invalid':
      return { kind: 'rejected', rejection: { code: 'capability_unsupported' } };
  }
}

export function capabilityCheckOf(outcome: CallOutcome): CapabilityCheck {
  switch (outcome.kind) {
    case 'no_return':
      return { kind: 'unreachable', failure: 'no_return' };
    case 'no_target':
      return { kind: 'no_target' };
    case 'failed':
      return { kind: 'unreachable', failure: outcome.reason };
    case 'returned':
      return fromAnswer(readCapabilityAnswer(outcome.retcode, outcome.ret));
  }
}

export async function checkCapability(deps: ResolvedDeps, minionId: string): Promise<CapabilityCheck> {
  return capabilityCheckOf(await deps.salt.call(minionId, 'oduflow_job.capabilities', [], deps.callTimeoutMs));
}
