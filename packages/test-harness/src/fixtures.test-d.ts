import { describe, expectTypeOf, it } from 'vitest';
import type { ProtocolErrorCode } from '@oduflow/protocol';
import type { FixtureCase, FixtureCategory, FixtureFile, FixtureInput } from './fixtures.js';

describe('fixture case types', () => {
  it('names every category the corpus holds', () => {
    expectTypeOf<FixtureCategory>().toEqualTypeOf<
      'identity' | 'canonical_json' | 'high_data' | 'reduction' | 'receipt' | 'status_answer' | 'capabilities' | 'transitions'
    >();
  });

  it('gives each category its own input', () => {
    expectTypeOf<FixtureInput<'capabilities'>>().toEqualTypeOf<{ answer: unknown }>();
    expectTypeOf<FixtureInput<'status_answer'>>().toHaveProperty('binding');
    expectTypeOf<FixtureInput<'canonical_json'>>().toEqualTypeOf<{ op: 'serialize'; value: unknown } | { op: 'parse'; text: string }>();
  });

  it('lets a case expect a result or name a protocol error code, never both', () => {
    type Case = FixtureCase<'capabilities'>;
    expectTypeOf<{ id: string; description: string; input: { answer: null }; expect: null }>().toExtend<Case>();
    expectTypeOf<{ id: string; description: string; input: { answer: null }; error: 'invalid_capabilities' }>().toExtend<Case>();
    expectTypeOf<{ id: string; description: string; input: { answer: null }; error: 'no_such_code' }>().not.toExtend<Case>();
    expectTypeOf<{ id: string; description: string; input: { answer: null }; expect: null; error: 'invalid_capabilities' }>().not.toExtend<Case>();
    expectTypeOf<NonNullable<Case['error']>>().toEqualTypeOf<ProtocolErrorCode>();
  });

  it('ties a file to its category', () => {
    expectTypeOf<FixtureFile<'transitions'>['category']>().toEqualTypeOf<'transitions'>();
    expectTypeOf<FixtureFile<'transitions'>['cases'][number]['input']>().toEqualTypeOf<FixtureInput<'transitions'>>();
  });
});
