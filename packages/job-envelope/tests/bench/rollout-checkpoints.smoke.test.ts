import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resultProblems } from '../../../test-harness/src/bench/measure.js';
import { runBenchSmoke, smokeResults } from '../../../test-harness/src/bench/smoke.js';
import { BENCHES } from '../../bench/rollout-checkpoints.js';

// The benchmark's smoke run (200 targets in 4 batches): well formed, never timed.
describe('the rollout-checkpoints benchmark', () => {
  it('writes a well-formed, clean result counting writes per stage and timing each resume kind in smoke mode', () => {
    const run = runBenchSmoke(join(import.meta.dirname, '..', '..'), 'bench/rollout-checkpoints.ts');
    expect(run.status, run.output).toBe(0);
    const results = smokeResults(run);
    expect(resultProblems(results, BENCHES, 'smoke')).toEqual([]);
    const rows = results[0]?.rows ?? [];
    // Every stage writes its before_stage and after_stage checkpoints and its three saves: counted, not timed.
    expect(rows.find((row) => row.label === 'checkpoint writes per stage')?.value).toEqual({ median: 5, min: 5, max: 5 });
    expect(rows.filter((row) => row.label.startsWith('resume '))).toHaveLength(5);
  }, 120_000);
});
