import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resultProblems } from '../../../test-harness/src/bench/measure.js';
import { runBenchSmoke, smokeResults } from '../../../test-harness/src/bench/smoke.js';
import { BENCHES } from '../../bench/store-dispatch.js';

// The benchmark's smoke run (a real file store on os.tmpdir(), a real PostgreSQL cluster): well formed, never timed.
describe('the store-dispatch benchmark', () => {
  it('writes a well-formed, clean result for the file store and for PostgreSQL in smoke mode', () => {
    const run = runBenchSmoke(join(import.meta.dirname, '..', '..'), 'bench/store-dispatch.ts');
    expect(run.status, run.output).toBe(0);
    expect([...run.files.keys()].sort()).toEqual(['store-dispatch-file.json', 'store-dispatch-postgres.json']);
    const results = smokeResults(run);
    expect(resultProblems(results, BENCHES, 'smoke')).toEqual([]);
    // Each result's target row compares the store with its floor.
    for (const result of results) expect(result.rows.some((row) => row.target !== null && row.floor !== null)).toBe(true);
    // A file-store dispatch persists at least the floor's three records, each an atomic write (counted, not timed).
    const file = results.find((result) => result.id === 'store-dispatch-file');
    expect(file?.rows.find((row) => row.label === 'atomic file writes per dispatch (counted)')?.value.median).toBeGreaterThanOrEqual(3);
  }, 180_000);
});
