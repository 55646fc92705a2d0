import type { JsonValue } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { expectTypeOf } from 'vitest';
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

// Public types, checked by `tsc` (npm run typecheck): a change to the API shape fails the build.

expectTypeOf(runJob).returns.resolves.toEqualTypeOf<JobReport>();
expectTypeOf(readJob).returns.toEqualTypeOf<JobRunView>();
expectTypeOf(listJobs).returns.toEqualTypeOf<JobListing[]>();

expectTypeOf<JobReport['status']>().toEqualTypeOf<'succeeded' | 'failed'>();
expectTypeOf<JobReport['stages'][number]['status']>().toEqualTypeOf<StageStatus>();
expectTypeOf<StageStatus>().toEqualTypeOf<'pending' | 'running' | 'succeeded' | 'failed'>();
expectTypeOf<JobRunView['status']>().toEqualTypeOf<'running' | 'interrupted' | 'succeeded' | 'failed'>();
expectTypeOf<JobReport['summary']>().toEqualTypeOf<{ counts: Record<string, number>; items: { id: string; state: string }[] } | null>();

// A spec is immutable once parsed.
expectTypeOf<JobSpec['stage_ids']>().toEqualTypeOf<readonly string[]>();
// @ts-expect-error a parsed spec cannot be changed
const mutate = (spec: JobSpec): void => void (spec.dry_run = true);
void mutate;

// A stage may fail only with a code it declared.
const stage: JobStage<'budget_exceeded'> = { id: 'batch-1', failureCodes: ['budget_exceeded'], run: (ctx) => ctx.fail('budget_exceeded') };
void stage;
expectTypeOf<StageContext<'budget_exceeded'>['fail']>().parameter(0).toEqualTypeOf<'budget_exceeded'>();
expectTypeOf<StageContext['fail']>().returns.toBeNever();
expectTypeOf<StageContext['state']>().toEqualTypeOf<JsonValue | null>();
expectTypeOf<StageContext['saveState']>().parameter(0).toEqualTypeOf<JsonValue | null>();
expectTypeOf<StageContext['scratch']>().returns.toEqualTypeOf<PrivateDir>();
expectTypeOf<StageContext['entry']>().toEqualTypeOf<'first' | 'after_interruption' | 'after_failure'>();

expectTypeOf<CheckpointEvent['kind']>().toEqualTypeOf<'start' | 'before_stage' | 'after_stage' | 'end'>();
expectTypeOf<JobEnvelopeError['code']>().toEqualTypeOf<JobEnvelopeErrorCode>();
expectTypeOf(JobEnvelopeError.isInstance).guards.toEqualTypeOf<JobEnvelopeError>();
