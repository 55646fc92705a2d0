import { isBlocking, type LegacyRequestRecord, type ProtocolRequestRecord } from '@oduflow/protocol';
import type { MasterDeps } from './deps.js';

/*
 * What an operator must see before the master runs unattended: records that
 * predate protocol 1 and are not reconciled (their original interpretation
 * stands; they are never adopted automatically; each carries its target, or
 * none, and the state it recorded), and every active unresolved request that
 * blocks its target. Read-only.
 */

export interface PreflightReport {
  /** Active legacy records: each blocks its target, or every target when it names none (`minion_id: null`). */
  readonly legacy: readonly LegacyRequestRecord[];
  /** Active protocol-1 requests that block their target (prepared, publishing, published, running, unknown, quarantined). */
  readonly unresolved: readonly ProtocolRequestRecord[];
  /** True when nothing predates protocol 1: safe to start without an explicit decision to proceed. */
  readonly clean: boolean;
}

export async function preflight(deps: Pick<MasterDeps, 'store'>): Promise<PreflightReport> {
  const blocking = await deps.store.list({ unresolved: true });
  const legacy = blocking.filter((r): r is LegacyRequestRecord => r.protocol === null && r.state === 'legacy');
  const unresolved = blocking.filter((r): r is ProtocolRequestRecord => r.protocol === 1 && isBlocking(r));
  return { legacy, unresolved, clean: legacy.length === 0 };
}
