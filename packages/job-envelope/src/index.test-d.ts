import type { JsonValue } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { describe, expectTypeOf, it } from 'vitest';
import {
  type CheckpointEvent,
  type JobEnvelopeErrorCode,
  type JobListing,
  type JobReport,
  type JobRunView,
  type JobSpec,
  type JobStage,
  type StageContext,
  type StageStatus,
  JobEnvelopeError,
  listJobs,
  readJob,
  runJob,
} from './index.js';

// Public types, checked by `tsc` (npm run typecheck) and by vitest (typecheck mode): a change to the API shape fails the build.

describe('public types of @oduflow/job-envelope', () => {
  it('runJob, readJob and listJobs return their documented views', () => {
    expectTypeOf(runJob).returns.resolves.toEqualTypeOf<JobReport>();
    expectTypeOf(readJob).returns.toEqualTypeOf<JobRunView>();
    expectTypeOf(listJobs).returns.toEqualTypeOf<JobListing[]>();
  });

  it('a report and a run view name every status they can hold', () => {
    expectTypeOf<JobReport['status']>().toEqualTypeOf<'succeeded' | 'failed'>();
    expectTypeOf<JobReport['stages'][number]['status']>().toEqualTypeOf<StageStatus>();
    expectTypeOf<StageStatus>().toEqualTypeOf<'pending' | 'running' | 'succeeded' | 'failed'>();
    expectTypeOf<JobRunView['status']>().toEqualTypeOf<'running' | 'interrupted' | 'succeeded' | 'failed'>();
    expectTypeOf<JobReport['summary']>().toEqualTypeOf<{ counts: Record<string, number>; items: { id: string; state: string }[] } | null>();
  });

  it('a spec is immutable once parsed', () => {
    expectTypeOf<JobSpec['stage_ids']>().toEqualTypeOf<readonly string[]>();
    const mutate = (spec: JobSpec): void => {
      // @ts-expect-error a parsed spec cannot be changed
      spec.dry_run = true;
    };
    expectTypeOf(mutate).toBeFunction();
  });

  it('a stage may fail only with a code it declared, and its context is typed', () => {
    const stage: JobStage<'budget_exceeded'> = { id: 'batch-1', failureCodes: ['budget_exceeded'], run: (ctx) => ctx.fail('budget_exceeded') };
    expectTypeOf(stage).toHaveProperty('failureCodes');
    expectTypeOf<StageContext<'budget_exceeded'>['fail']>().parameter(0).toEqualTypeOf<'budget_exceeded'>();
    expectTypeOf<StageContext['fail']>().returns.toBeNever();
    expectTypeOf<StageContext['state']>().toEqualTypeOf<JsonValue | null>();
    expectTypeOf<StageContext['saveState']>().parameter(0).toEqualTypeOf<JsonValue | null>();
    expectTypeOf<StageContext['scratch']>().returns.toEqualTypeOf<PrivateDir>();
    expectTypeOf<StageContext['entry']>().toEqualTypeOf<'first' | 'after_interruption' | 'after_failure'>();
    expectTypeOf<StageContext['signal']>().toEqualTypeOf<AbortSignal>();
  });

  it('checkpoint events and errors are closed sets', () => {
    expectTypeOf<CheckpointEvent['kind']>().toEqualTypeOf<'start' | 'before_stage' | 'after_stage' | 'end'>();
    expectTypeOf<JobEnvelopeError['code']>().toEqualTypeOf<JobEnvelopeErrorCode>();
    expectTypeOf<typeof JobEnvelopeError.isInstance>().guards.toEqualTypeOf<JobEnvelopeError>();
  });
});
