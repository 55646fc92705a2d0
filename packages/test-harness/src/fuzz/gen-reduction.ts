import fc from 'fast-check';
import { type FuzzCase, fuzzCase } from './fuzz-case.js';
import { nearDomainValue } from './gen-json.js';
import { trickyKey, trickyString } from './gen-text.js';

/*
 * What `state.sls` / `state.high` may return (DESIGN §3 reduction): mappings
 * of state ids to results whose `result` is true, false, None (test mode),
 * missing or of another type; lists (render errors, conflicts); strings;
 * empty mappings; anything else.
 */

const SALT_STATE_IDS = ['pkg_|-nginx_|-nginx_|-installed', 'file_|-motd_|-/etc/motd_|-managed', 'cmd_|-x_|-echo_|-run', 'test_|-a_|-a_|-nop'];

const stateKey = fc.oneof(fc.constantFrom(...SALT_STATE_IDS), trickyKey);

/** Mostly booleans, so that succeeded and failed are common, with every kind of non-proof. */
const resultValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constant(true), weight: 8 },
  { arbitrary: fc.constant(false), weight: 3 },
  { arbitrary: fc.constantFrom(null, 1, 0, 'True', 'true', '', [], {}, 1.5, [true], { result: true }), weight: 1 },
);

/** One state's result object: `result` (or none) beside the other fields Salt writes. */
const stateResult: fc.Arbitrary<unknown> = fc
  .tuple(fc.oneof({ arbitrary: resultValue, weight: 11 }, { arbitrary: fc.constant(undefined), weight: 1 }), fc.dictionary(fc.constantFrom('changes', 'comment', 'name', '__run_num__', 'duration', 'Result', 'results'), nearDomainValue, { maxKeys: 3, noNullPrototype: true }))
  .map(([result, others]) => (result === undefined ? others : { ...others, result }));

const mapping = fc.dictionary(stateKey, fc.oneof({ arbitrary: stateResult, weight: 10 }, { arbitrary: nearDomainValue, weight: 1 }), { minKeys: 1, maxKeys: 6, noNullPrototype: true });

export const reductionCase: fc.Arbitrary<FuzzCase> = fc.oneof(
  { arbitrary: mapping.map((state_return) => fuzzCase('reduction', { state_return }, 'a state mapping')), weight: 8 },
  { arbitrary: fc.array(trickyString, { maxLength: 3 }).map((state_return) => fuzzCase('reduction', { state_return }, 'a list (render errors or a conflict)')), weight: 1 },
  { arbitrary: fc.oneof(trickyString, fc.constantFrom<unknown>({}, null, true, 0, [])).map((state_return) => fuzzCase('reduction', { state_return }, 'a string, an empty mapping or a scalar')), weight: 1 },
  { arbitrary: nearDomainValue.map((state_return) => fuzzCase('reduction', { state_return }, 'an arbitrary value')), weight: 1 },
);
