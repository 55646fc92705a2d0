import { jidForInstant, type RecordStore } from '@oduflow/master-runner';
import {
  applyEvent,
  canonicalJson,
  createRequestRecord,
  stateDigest,
  type HistorySource,
  type Profile,
  type RequestEvent,
  type RequestRecord,
} from '@oduflow/protocol';
import { randomUUID } from 'node:crypto';
import { tokenDigest, tokenRegistry, type Scope, type TokenRegistry } from '../../../src/serve/tokens.js';
import { GLOBEX_A, TOKENS } from '../../serve/support/service-world.js';

/*
 * A seeded fleet for the dashboard tests: records in every interesting
 * state, reached through the protocol's own transitions (applyEvent) and
 * stored through the store's units, exactly as the service would leave
 * them. Tenant acme owns the FLEET minions and the ROLLOUT minions; globex
 * owns one blocked target that acme must never see.
 */

const id = (n: number): string => `client-${n.toString(16).padStart(8, '0')}-1f2d-4e3c-8a9b-5c6d7e8f9a0b`;

export const FLEET = {
  healthy: id(0x0a000001),
  unknown: id(0x0a000002),
  quarantined: id(0x0a000003),
  prepared: id(0x0a000004),
  notReady: id(0x0a000005),
  custom: id(0x0a000006),
  uncertain: id(0x0a000007),
} as const;

/** Fresh targets for the rollout test (sorted: the first two are its first batch). */
export const ROLLOUT_TARGETS = [id(0x0b000001), id(0x0b000002), id(0x0b000003), id(0x0b000004)] as const;

const ALL: Scope[] = ['read', 'dispatch', 'dispatch:custom', 'reconcile'];

export function dashboardTokens(): TokenRegistry {
  const entry = (tokenId: string, token: string, tenant: string, actor: string, scopes: Scope[]) => ({ id: tokenId, sha256: tokenDigest(token), tenant, actor, scopes });
  return tokenRegistry(
    {
      tenants: { acme: { minions: [...Object.values(FLEET), ...ROLLOUT_TARGETS] }, globex: { minions: [GLOBEX_A] } },
      tokens: [
        entry('acme-all', TOKENS.acmeAll, 'acme', 'acme-ops', ALL),
        entry('acme-read', TOKENS.acmeRead, 'acme', 'acme-viewer', ['read']),
        entry('acme-reconcile', TOKENS.acmeReconcile, 'acme', 'acme-oncall', ['read', 'reconcile']),
        entry('globex-all', TOKENS.globexAll, 'globex', 'globex-ops', ALL),
      ],
    },
    '/test/dashboard-tokens.json',
  );
}

/** What the seeded store holds, by name. */
export interface Seeded {
  readonly succeeded: RequestRecord;
  readonly failedEarlier: RequestRecord;
  readonly unknown: RequestRecord;
  readonly quarantined: RequestRecord;
  readonly prepared: RequestRecord;
  readonly rejected: RequestRecord;
  readonly custom: RequestRecord;
  readonly uncertain: RequestRecord;
  readonly globexUnknown: RequestRecord;
}

/** The acme counts the overview must show for the seeded store. */
export const SEEDED_COUNTS = { succeeded: 2, failed: 1, unknown: 1, quarantined: 1, prepared: 1, rejected: 1, publishing: 1 } as const;

const CUSTOM_DATA = canonicalJson({ 'grow-data': { 'cmd.run': [{ name: '/usr/local/sbin/grow-data' }] } });

type Step = (at: string, r: RequestRecord) => RequestEvent;

const intent: Step = (at) => ({ type: 'intent_recorded', at });
const acked: Step = (at) => ({ type: 'publish_acked', at });
const answered =
  (status: 'running' | 'succeeded' | 'failed' | 'unknown', passed = 0, total = 0): Step =>
  (at, r) => ({
    type: 'observed',
    at,
    answer: {
      protocol: 1,
      minion_id: r.minion_id as string,
      request_id: r.request_id,
      jid: r.jid as string,
      profile: r.protocol === 1 ? r.profile : 'configure',
      state_digest: r.protocol === 1 ? r.state_digest : '',
      status,
      passed,
      total,
    },
  });

/** Who commits each event in the service: the relay publishes, polls see progress, the event stream brings the final return. */
function sourceOf(event: RequestEvent): HistorySource {
  if (event.type === 'observed') return event.answer.status === 'running' ? 'poller' : 'event_stream';
  if (event.type === 'minion_error' || event.type === 'poll_failed') return 'poller';
  return event.type === 'reconciled' ? 'reconcile' : 'relay';
}

export async function seedFleet(store: RecordStore, now = new Date()): Promise<Seeded> {
  let clock = now.getTime() - 3 * 3_600_000;
  let jidClock = clock;
  const tick = (seconds: number): string => new Date((clock += seconds * 1000)).toISOString();
  const put = async (minionId: string, profile: Profile, steps: readonly Step[], digest = ''): Promise<RequestRecord> => {
    const at = tick(60);
    jidClock = Math.max(jidClock + 1, clock);
    const record = createRequestRecord({ request_id: randomUUID(), minion_id: minionId, profile, state_digest: digest, jid: jidForInstant(new Date(jidClock)), at });
    const created = await store.withTarget(minionId, (unit) => unit.create(record, { source: 'admission' }));
    if (!created.created) throw new Error(`seed: ${created.reason}`);
    let current: RequestRecord = record;
    for (const step of steps) {
      const event = step(tick(2), current);
      current = (await store.updateRequest(record.request_id, (r) => applyEvent(r, event), { event: event.type, source: sourceOf(event) })).after;
    }
    return current;
  };
  const failedEarlier = await put(FLEET.healthy, 'configure', [intent, acked, answered('running'), answered('failed', 57, 60)]);
  const succeeded = await put(FLEET.healthy, 'configure', [intent, acked, answered('running'), answered('succeeded', 60, 60)]);
  const unknown = await put(FLEET.unknown, 'production', [intent, acked, answered('running'), answered('unknown')]);
  const quarantined = await put(FLEET.quarantined, 'volume_resize', [intent, acked, (at) => ({ type: 'minion_error', at, error: 'binding_conflict' })]);
  const prepared = await put(FLEET.prepared, 'credentials', []);
  const rejected = await put(FLEET.notReady, 'configure', [(at) => ({ type: 'capability_failed', at, reason: 'not_ready', readiness: ['multiprocessing'] })]);
  const custom = await put(FLEET.custom, 'custom', [intent, acked, answered('succeeded', 3, 3)], stateDigest(CUSTOM_DATA));
  const uncertain = await put(FLEET.uncertain, 'configure', [intent, (at) => ({ type: 'publish_uncertain', at, failure: 'timeout' })]);
  const globexUnknown = await put(GLOBEX_A, 'configure', [intent, acked, answered('unknown')]);
  return { succeeded, failedEarlier, unknown, quarantined, prepared, rejected, custom, uncertain, globexUnknown };
}
