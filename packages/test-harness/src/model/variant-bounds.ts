import type { BrokenVariant, ModelConfig } from './model-state.js';

/*
 * The bound each broken variant is checked at: the smallest configuration
 * whose interleavings reach the rule the variant breaks (two requests for
 * the blocker rule, a killed job and a duplicated publication for the
 * minion's re-run, a duplicated publication for the lock order, a refusal
 * for status between its writes), so a caught variant says the checker
 * looks there.
 */

const BASE: ModelConfig = {
  workers: 2,
  requests: 1,
  duplications: 1,
  masterCrashes: 1,
  minionCrashes: 1,
  refusals: 0,
  reconciles: 1,
  notSent: 0,
  capabilityRejections: false,
  stateResults: ['succeeded'],
};

const OVERRIDES: Readonly<Record<BrokenVariant, Partial<ModelConfig>>> = {
  republish_on_not_started: {},
  poller_overwrites_stored_record: { reconciles: 0 },
  dispatch_ignores_blockers: { requests: 2 },
  publish_before_intent: {},
  minion_reruns_abandoned_claim: { workers: 1, masterCrashes: 0, reconciles: 0 },
  minion_takes_execution_lock_first: { workers: 1, masterCrashes: 0, minionCrashes: 0, reconciles: 0 },
  status_running_between_refusal_writes: { workers: 1, duplications: 0, masterCrashes: 0, minionCrashes: 0, reconciles: 0, refusals: 1 },
};

export function variantBound(variant: BrokenVariant): ModelConfig {
  return { ...BASE, ...OVERRIDES[variant], variant };
}
