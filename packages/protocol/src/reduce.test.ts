import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { reduceStateResult } from './reduce.js';

const RUNS = { seed: 20_261_129, numRuns: 300 };
const state = (result: unknown) => ({ result, comment: 'ok', changes: {} });
const UNKNOWN = { status: 'unknown', passed: 0, total: 0 };

describe('reduceStateResult', () => {
  it('reports succeeded with n/n when every result is exactly true', () => {
    expect(reduceStateResult({ a: state(true), b: state(true) })).toStrictEqual({ status: 'succeeded', passed: 2, total: 2 });
  });

  it('reports failed and counts the trues when at least one result is false and all are booleans', () => {
    expect(reduceStateResult({ a: state(true), b: state(false), c: state(true) })).toStrictEqual({ status: 'failed', passed: 2, total: 3 });
  });

  it('reports unknown for a non-boolean result even next to a false', () => {
    for (const result of [null, 1, 0, 'True', 'false', {}, [true]]) {
      expect(reduceStateResult({ a: state(false), b: state(result) })).toStrictEqual(UNKNOWN);
    }
  });

  it('reports unknown for lists, strings, empty mappings and states without a result', () => {
    for (const value of [[], ['Rendering SLS failed'], 'Traceback', {}, null, 0, true, { a: {} }, { a: [state(true)] }, { a: true }]) {
      expect(reduceStateResult(value)).toStrictEqual(UNKNOWN);
    }
  });

  it('always counts passed ≤ total and proves a verdict only from booleans', () => {
    const anyResult = fc.oneof(fc.boolean(), fc.constantFrom(null, 0, 1, 'True'));
    fc.assert(
      fc.property(fc.dictionary(fc.string(), anyResult.map(state), { noNullPrototype: true }), (stateReturn) => {
        const reduced = reduceStateResult(stateReturn);
        const results = Object.values(stateReturn).map((s) => s.result);
        const allBooleans = results.length > 0 && results.every((r) => typeof r === 'boolean');
        expect(reduced.passed).toBeLessThanOrEqual(reduced.total);
        expect(reduced.status === 'unknown').toBe(!allBooleans);
        if (allBooleans) expect(reduced.passed).toBe(results.filter((r) => r).length);
      }),
      RUNS,
    );
  });
});
