import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect } from 'vitest';
import { enumerateSequence, type Sequence, type SequenceReport } from '../../src/crash/enumerate.js';

/*
 * npm test runs the smoke enumeration (structured subsets of each prefix's
 * un-persisted set, at most SMOKE_TREES recoveries per sequence, every
 * sequence); ODUFLOW_CRASH_STATES=full (npm run verify) runs every subset and
 * every torn write with no cap. Each report goes to
 * .test-results/crash-states/<sequence>.json and one line to stdout.
 */

const FULL = process.env['ODUFLOW_CRASH_STATES'] === 'full';
const SMOKE_TREES = 24;
const RESULTS = resolve(import.meta.dirname, '..', '..', '..', '..', '.test-results', 'crash-states');

export const CRASH_TEST_TIMEOUT_MS = FULL ? 600_000 : 120_000;

function slug(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/(^-|-$)/g, '');
}

/** Enumerates one sequence and fails with the violating states, if any. */
export async function expectEveryCrashStateAllowed<C, O>(sequence: Sequence<C, O>): Promise<SequenceReport> {
  const report = await enumerateSequence(sequence, FULL ? { mode: 'full' } : { mode: 'smoke', maxTrees: SMOKE_TREES });
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(join(RESULTS, `${slug(sequence.name)}.json`), `${JSON.stringify(report, null, 2)}\n`);
  console.log(
    `crash states: ${report.sequence}: ${report.operations} operations, ${report.states} states (${report.trees} trees) explored (${report.mode}), ` +
      `${report.violations.length} not allowed, ${report.ms} ms; outcomes ${JSON.stringify(report.outcomes)}`,
  );
  expect(report.states).toBeGreaterThan(0);
  expect(report.violations, JSON.stringify(report.violations.slice(0, 5), null, 2)).toEqual([]);
  return report;
}
