import type { ModelConfig } from './model-state.js';

/*
 * The bounds the model is checked at. `SMOKE_BOUNDS` run inside `npm test`
 * (seconds); `FULL_BOUNDS` run behind `npm run verify`. Each bound is a
 * configuration explored completely: every interleaving of every actor
 * within its budgets of faults.
 */

const EVERY_RESULT = ['succeeded', 'failed', 'unknown'] as const;

export interface NamedBound {
  readonly name: string;
  readonly config: ModelConfig;
}

export const SMOKE_BOUNDS: readonly NamedBound[] = [
  {
    name: 'one worker, one request, one of every fault',
    config: { workers: 1, requests: 1, duplications: 1, masterCrashes: 1, minionCrashes: 1, refusals: 1, reconciles: 1, notSent: 1, capabilityRejections: true, stateResults: ['succeeded', 'unknown'] },
  },
  {
    name: 'two workers racing on one request, a worker crash, a reconciliation',
    config: { workers: 2, requests: 1, duplications: 0, masterCrashes: 1, minionCrashes: 0, refusals: 0, reconciles: 1, notSent: 0, capabilityRejections: false, stateResults: ['succeeded'] },
  },
  {
    name: 'one worker, two requests for one target, reconciled in between',
    config: { workers: 1, requests: 2, duplications: 0, masterCrashes: 0, minionCrashes: 0, refusals: 0, reconciles: 1, notSent: 0, capabilityRejections: false, stateResults: ['succeeded'] },
  },
];

export const FULL_BOUNDS: readonly NamedBound[] = [
  ...SMOKE_BOUNDS,
  {
    name: 'one worker, one request, one of every fault, every result',
    config: { workers: 1, requests: 1, duplications: 1, masterCrashes: 1, minionCrashes: 1, refusals: 1, reconciles: 1, notSent: 1, capabilityRejections: true, stateResults: EVERY_RESULT },
  },
  {
    name: 'two workers, one request, a duplication, a killed job',
    config: { workers: 2, requests: 1, duplications: 1, masterCrashes: 0, minionCrashes: 1, refusals: 0, reconciles: 0, notSent: 0, capabilityRejections: false, stateResults: ['succeeded', 'unknown'] },
  },
  {
    name: 'two workers, one request, a duplication, a killed job, a refusal, a reconciliation',
    config: { workers: 2, requests: 1, duplications: 1, masterCrashes: 0, minionCrashes: 1, refusals: 1, reconciles: 1, notSent: 0, capabilityRejections: false, stateResults: ['succeeded'] },
  },
  {
    name: 'one worker, two requests for one target, a duplication, a killed job, a refusal, a reconciliation',
    config: { workers: 1, requests: 2, duplications: 1, masterCrashes: 0, minionCrashes: 1, refusals: 1, reconciles: 1, notSent: 0, capabilityRejections: false, stateResults: ['succeeded'] },
  },
];
