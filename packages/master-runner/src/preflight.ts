import { isBlocking, type RequestRecord } from '@oduflow/protocol';
import type { MasterDeps } from './deps.js';

/*
 * What an operator must see before the master runs unattended: records that
 * predate protocol 1 and are not reconciled (their original interpretation
 * stands; they are never adopted automatically), and every active unresolved
 * request that blocks its target. Read-only.
 */

export interface PreflightReport {
  /** Active legacy records: each blocks its target (or every target, when it names none). */
  readonly legacy: readonly RequestRecord[];
  /** Active protocol-1 requests that block their target (prepared, publishing, published, running, unknown, quarantined). */
  readonly unresolved: readonly RequestRecord[];
  /** True when nothing predates protocol 1: safe to start without an explicit decision to proceed. */
  readonly clean: boolean;
}

export async function preflight(deps: Pick<MasterDeps, 'store'>): Promise<PreflightReport> {
  const blocking = await deps.store.list({ unresolved: true });
  const legacy = blocking.filter((r) => r.state === 'legacy');
  const unresolved = blocking.filter((r) => r.protocol === 1 && isBlocking(r));
  return { legacy, unresolved, clean: legacy.length === 0 };
}
