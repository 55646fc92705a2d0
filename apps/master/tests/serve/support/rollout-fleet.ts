import type { CallReply } from '../../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { testTokensFile } from './service-world.js';

/*
 * What the rollout tests of the service share: a fleet of minions owned by
 * tenant acme (beside the two of the common tokens file), and stand-in
 * answers that keep some targets `running` until a test lets them finish.
 */

/** 36 minions of tenant acme, in their canonical (sorted) order: batch i of size 10 is FLEET.slice(10 i, 10 i + 10). */
export const FLEET: readonly string[] = Array.from({ length: 36 }, (_, i) => `client-0190e6a5-1c2d-7e3f-8a4b-${String(i).padStart(12, '0')}`);

/** The common tokens file with the fleet given to acme. */
export function fleetTokensFile(): unknown {
  const file = testTokensFile() as { tenants: Record<string, { minions: string[] }>; tokens: unknown[] };
  file.tenants['acme']?.minions.push(...FLEET);
  return file;
}

type StatusHook = (args: readonly unknown[], minionId: string, simulated: CallReply) => CallReply;

/**
 * A stand-in status hook: the minions for which `answer(minionId)` returns
 * a status say so once their request ran (a `not_started` answer stays as
 * it is); the others answer what they simulate.
 */
export function statusFor(answer: (minionId: string) => 'running' | 'failed' | undefined): StatusHook {
  return (_args, minionId, simulated) => {
    if (!('ret' in simulated)) return simulated;
    const ret = simulated.ret as Record<string, unknown>;
    const status = answer(minionId);
    if (status === undefined || ret['status'] === 'not_started') return simulated;
    return { retcode: 0, ret: { ...ret, status, ...(status === 'failed' ? { passed: 1, total: 3 } : { passed: 0, total: 0 }) } };
  };
}

/** How many times each minion was published to. */
export function publicationsPerMinion(publications: readonly { readonly minionId: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const p of publications) counts.set(p.minionId, (counts.get(p.minionId) ?? 0) + 1);
  return counts;
}
