import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resultProblems } from '../../../test-harness/src/bench/measure.js';
import { runBenchSmoke, smokeResults } from '../../../test-harness/src/bench/smoke.js';
import { BENCHES } from '../../bench/file-store-scaling.js';

// The benchmark's smoke run (two small seeded stores): well formed, never timed.
describe('the file-store-scaling benchmark', () => {
  it('writes a well-formed, clean result with a flatness ratio per operation in smoke mode', () => {
    const run = runBenchSmoke(join(import.meta.dirname, '..', '..'), 'bench/file-store-scaling.ts');
    expect(run.status, run.output).toBe(0);
    const results = smokeResults(run);
    expect(resultProblems(results, BENCHES, 'smoke')).toEqual([]);
    expect(results[0]?.rows.map((row) => row.label)).toEqual([
      'open (reads the format marker)',
      'dispatch unit (withTarget → blockers → create)',
      'blocking check alone (withTarget → blockers)',
      'list({ unresolved: true })',
    ]);
    expect(results[0]?.rows.every((row) => row.target?.kind === 'ratio_max')).toBe(true);
  }, 120_000);
});
