import { describe, expectTypeOf, it } from 'vitest';
import type {
  Binding,
  CapabilityVerdict,
  LegacyRequestRecord,
  Observation,
  ProtocolRequestRecord,
  ReadinessReason,
  RecordReason,
  RecordReasonCode,
  RefusalReason,
  RequestEvent,
  RequestEventType,
  RequestRecord,
  StatusAnswer,
} from './index.js';
import { RequestRecordSchema, applyEvent, parseStatusAnswer } from './index.js';

describe('public types of @oduflow/protocol', () => {
  it('Binding is any subset of the five binding fields, with their answer types', () => {
    expectTypeOf<Binding>().toEqualTypeOf<{
      minion_id?: string;
      request_id?: string;
      jid?: string;
      profile?: 'configure' | 'production' | 'volume_resize' | 'credentials' | 'custom';
      state_digest?: string;
    }>();
    expectTypeOf<Partial<Binding>>().toEqualTypeOf<Binding>();
  });

  it('RequestEvent is discriminated by type, each with exactly its payload', () => {
    expectTypeOf<RequestEvent['type']>().toEqualTypeOf<RequestEventType>();
    expectTypeOf<Extract<RequestEvent, { type: 'publish_uncertain' }>>().toHaveProperty('failure');
    expectTypeOf<Extract<RequestEvent, { type: 'minion_error' }>['error']>().toEqualTypeOf<string>();
    expectTypeOf<Extract<RequestEvent, { type: 'capability_failed' }>['reason']>().toEqualTypeOf<
      'capability_missing' | 'capability_unsupported' | 'not_ready'
    >();
    expectTypeOf<Extract<RequestEvent, { reason: 'not_ready' }>>().toHaveProperty('readiness');
    // A free-text reason is no longer an event field of a publication outcome.
    expectTypeOf<{ type: 'publish_uncertain'; at: string; reason: string }>().not.toExtend<RequestEvent>();
  });

  it('a record reason is a closed union keyed by code', () => {
    expectTypeOf<RecordReasonCode>().toEqualTypeOf<
      | 'publish_uncertain'
      | 'publish_not_sent'
      | 'capability_missing'
      | 'capability_unsupported'
      | 'not_ready'
      | 'capability_unanswered'
      | 'refused'
      | 'refused_after_running'
      | 'poll_failed'
      | 'minion_error'
      | 'binding_conflict'
      | 'unknown'
    >();
    expectTypeOf<Extract<RecordReason, { code: 'not_ready' }>['readiness']>().toEqualTypeOf<readonly ReadinessReason[]>();
    expectTypeOf<Extract<RecordReason, { code: 'refused' }>['refusal']>().toEqualTypeOf<RefusalReason>();
    expectTypeOf<string>().not.toExtend<RecordReason>();
  });

  it('the protocol record type is the schema output, read-only at the top', () => {
    expectTypeOf<ProtocolRequestRecord>().toEqualTypeOf<Readonly<ReturnType<typeof RequestRecordSchema.parse>>>();
    expectTypeOf<ProtocolRequestRecord['reason']>().toEqualTypeOf<RecordReason | null>();
    expectTypeOf<ProtocolRequestRecord['last_observation']>().toEqualTypeOf<Observation | null>();
    expectTypeOf<ProtocolRequestRecord['state']>().not.toEqualTypeOf<RequestRecord['state']>();
    expectTypeOf<LegacyRequestRecord['protocol']>().toEqualTypeOf<null>();
    expectTypeOf(applyEvent).returns.toEqualTypeOf<RequestRecord>();
  });

  it('a refused status answer, and only it, carries a reason', () => {
    expectTypeOf(parseStatusAnswer).returns.toEqualTypeOf<StatusAnswer>();
    expectTypeOf<Extract<StatusAnswer, { status: 'refused' }>['reason']>().toEqualTypeOf<RefusalReason>();
    expectTypeOf<'reason' extends keyof Exclude<StatusAnswer, { status: 'refused' }> ? true : false>().toEqualTypeOf<false>();
  });

  it('a not-ready verdict always names at least one reason', () => {
    expectTypeOf<Extract<CapabilityVerdict, { ready: false }>['reasons']>().toEqualTypeOf<readonly [ReadinessReason, ...ReadinessReason[]]>();
  });
});
