import { describe, expectTypeOf, it } from 'vitest';
import {
  listRollouts,
  readRollout,
  runRollout,
  startRollout,
  type RolloutHandle,
  type RolloutListing,
  type RolloutProgress,
  type RolloutReport,
  type TargetOutcome,
} from '../index.js';

// The rollout API's shape, checked by `tsc` (npm run typecheck): the service and the CLI rely on it.
describe('the rollout API', () => {
  it('has the documented shapes', () => {
    expectTypeOf(startRollout).returns.resolves.toEqualTypeOf<RolloutHandle>();
    expectTypeOf<RolloutHandle['done']>().toEqualTypeOf<Promise<RolloutReport>>();
    expectTypeOf(runRollout).returns.resolves.toEqualTypeOf<RolloutReport>();
    expectTypeOf(readRollout).returns.toEqualTypeOf<RolloutReport>();
    expectTypeOf(listRollouts).returns.toEqualTypeOf<RolloutListing[]>();

    expectTypeOf<RolloutReport['status']>().toEqualTypeOf<'running' | 'interrupted' | 'succeeded' | 'failed'>();
    expectTypeOf<RolloutReport['targets'][number]['outcome']>().toEqualTypeOf<TargetOutcome>();
    expectTypeOf<TargetOutcome>().toEqualTypeOf<
      'succeeded' | 'failed' | 'unknown' | 'quarantined' | 'unresolved' | 'rejected' | 'reconciled' | 'blocked' | 'unreachable' | 'no_target' | 'skipped' | 'pending'
    >();
    expectTypeOf<RolloutProgress['kind']>().toEqualTypeOf<'started' | 'stage_started' | 'target' | 'stage_finished' | 'finished'>();
  });
});
