import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resultProblems } from '../../../test-harness/src/bench/measure.js';
import { runBenchSmoke, smokeResults } from '../../../test-harness/src/bench/smoke.js';
import { BENCHES } from '../../bench/receipt-store-writes.js';

// The benchmark's smoke run: well formed, never timed.
describe('the receipt-store-writes benchmark', () => {
  it('writes a well-formed, clean result with every primitive beside its floor in smoke mode', () => {
    const run = runBenchSmoke(join(import.meta.dirname, '..', '..'), 'bench/receipt-store-writes.ts');
    expect(run.status, run.output).toBe(0);
    const results = smokeResults(run);
    expect(resultProblems(results, BENCHES, 'smoke')).toEqual([]);
    expect(results[0]?.rows).toHaveLength(6);
    expect(results[0]?.rows.every((row) => row.floor !== null)).toBe(true);
  }, 120_000);
});
