import { describe, expect, it } from 'vitest';
import { PROTOCOL_CATEGORIES } from '../fixture-runners.js';
import { runDifferentialFuzz, type FuzzReport } from './differential.js';
import { appendFixtureCases, fixtureDraftFor } from './fixture-writer.js';
import { asciiJson, describeOutcome } from './outcome.js';
import { PythonOracle } from './python-oracle.js';

/*
 * The seeded smoke of `npm test`: 20,000 cases through @oduflow/protocol and
 * oduflow_job.py must agree on every one. The seed is fixed so a failure
 * replays; a disagreement is written into the corpus (as `npm run fuzz`
 * does), so the conformance runners keep it after the fix.
 */

export const SMOKE_SEED = 20_260_613;
const SMOKE_CASES = 20_000;

/** Every error code the categories can answer: the generators must reach each rule, not just the first check. */
const REACHABLE_CODES = [
  'invalid_request_id',
  'invalid_minion_id',
  'invalid_jid',
  'non_canonical_json',
  'unsupported_json_value',
  'invalid_high_data',
  'high_data_too_large',
  'high_data_too_deep',
  'forbidden_key',
  'invalid_receipt',
  'invalid_status_answer',
  'invalid_capabilities',
  'binding_conflict',
];

function explained(report: FuzzReport, written: readonly string[]): string {
  const lines = report.disagreements.map(
    (d) =>
      `${d.case.category} x${d.occurrences} (replay seed ${d.replay.seed} path ${d.replay.path}): ${d.case.label}; ` +
      `TypeScript ${describeOutcome(d.typescript)}, Python ${describeOutcome(d.python)}; input ${asciiJson(d.case.input).slice(0, 300)}`,
  );
  return `seed ${report.seed}: ${report.disagreeing} of ${report.cases} cases disagree\n${lines.join('\n')}\nnew fixture cases: ${written.join(', ') || 'none'}`;
}

describe('differential fuzzing of @oduflow/protocol against oduflow_job.py', () => {
  it(`gives the same answer, code and bytes in both languages on ${SMOKE_CASES} seeded cases`, async () => {
    const oracle = PythonOracle.start();
    let report: FuzzReport;
    try {
      report = await runDifferentialFuzz(oracle, { cases: SMOKE_CASES, seed: SMOKE_SEED });
    } finally {
      await oracle.close();
    }
    const written = report.disagreeing === 0 ? [] : appendFixtureCases(report.disagreements.flatMap((d) => fixtureDraftFor(d, SMOKE_SEED) ?? []));
    console.info(`differential fuzz smoke: ${report.cases} cases, seed ${report.seed}, ${report.casesPerSecond} cases/s`);
    expect(report.disagreeing, explained(report, written)).toBe(0);
    expect(report.cases).toBe(SMOKE_CASES);
    for (const category of PROTOCOL_CATEGORIES) {
      const counts = report.byCategory[category];
      expect(counts.accepted, `${category} accepted`).toBeGreaterThan(0);
      // A reduction never fails: any value reduces, to unknown at worst.
      if (category !== 'reduction') expect(counts.rejected, `${category} rejected`).toBeGreaterThan(0);
    }
    expect(REACHABLE_CODES.filter((code) => (report.codes[code] ?? 0) === 0)).toStrictEqual([]);
  }, 300_000);
});
