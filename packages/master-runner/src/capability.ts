import { parseCapabilities } from '@oduflow/protocol';
import type { ResolvedDeps } from './deps.js';

/*
 * A new request is published only to a minion that proves protocol 1 on the
 * pinned Salt: otherwise an older client would run the state without writing
 * a receipt, and the result could be lost again.
 */

export type CapabilityVerdict = { readonly ok: true } | { readonly ok: false; readonly reason: string };

export async function checkCapability(deps: ResolvedDeps, minionId: string): Promise<CapabilityVerdict> {
  const outcome = await deps.salt.call(minionId, 'oduflow_job.capabilities', [], deps.callTimeoutMs);
  switch (outcome.kind) {
    case 'no_return':
      return { ok: false, reason: 'capability_no_return' };
    case 'no_target':
      return { ok: false, reason: 'capability_no_target' };
    case 'failed':
      return { ok: false, reason: `capability_call_${outcome.reason}` };
    case 'returned':
      if (outcome.retcode !== 0) return { ok: false, reason: 'capability_missing' };
      try {
        parseCapabilities(outcome.ret);
        return { ok: true };
      } catch {
        return { ok: false, reason: 'capability_unsupported' };
      }
  }
}
