#!/usr/bin/env node
/*
 * `npm run fuzz -- --cases N [--seed S] [--batch B] [--no-fixtures] [--json]`:
 * the differential fuzzer of @oduflow/protocol against oduflow_job.py at any
 * size. Every disagreement is shrunk and appended to the fixture corpus
 * (unless --no-fixtures); exit 1 when there was any, 0 otherwise, 2 on a
 * usage error.
 */
import { parseArgs } from 'node:util';
import { runDifferentialFuzz, type FuzzReport } from './fuzz/differential.js';
import { appendFixtureCases, fixtureDraftFor } from './fuzz/fixture-writer.js';
import { asciiJson, describeOutcome } from './fuzz/outcome.js';
import { PythonOracle } from './fuzz/python-oracle.js';

const USAGE = 'usage: npm run fuzz -- --cases N [--seed S] [--batch B] [--no-fixtures] [--json]';

function integerOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`--${name} must be an integer`);
  return n;
}

function summary(report: FuzzReport, written: readonly string[]): string {
  const lines = [
    `differential fuzz: ${report.cases} cases, seed ${report.seed}, ${(report.elapsedMs / 1000).toFixed(1)} s, ${report.casesPerSecond} cases/s`,
    ...Object.entries(report.byCategory).map(([category, c]) => `  ${category.padEnd(15)} ${String(c.cases).padStart(9)} cases  ${String(c.accepted).padStart(9)} accepted  ${String(c.rejected).padStart(9)} rejected`),
    `  error codes agreed on: ${Object.entries(report.codes)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([code, n]) => `${code} ${n}`)
      .join(', ')}`,
    `disagreements: ${report.disagreeing}`,
  ];
  for (const d of report.disagreements) {
    lines.push(
      `  ${d.case.category} (${d.occurrences}x, replay seed ${d.replay.seed} path ${d.replay.path}): ${d.case.label}`,
      `    TypeScript ${describeOutcome(d.typescript)}`,
      `    Python     ${describeOutcome(d.python)}`,
      `    input ${asciiJson(d.case.input).slice(0, 400)}`,
    );
  }
  if (written.length > 0) lines.push(`new fixture cases: ${written.join(', ')}`);
  return lines.join('\n');
}

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        cases: { type: 'string' },
        seed: { type: 'string' },
        batch: { type: 'string' },
        'no-fixtures': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  let cases: number;
  let seed: number;
  let batchSize: number;
  try {
    cases = integerOption(values.cases, 'cases', 100_000);
    seed = integerOption(values.seed, 'seed', Date.now() % 2 ** 31);
    batchSize = integerOption(values.batch, 'batch', 500);
    if (cases <= 0 || batchSize <= 0) throw new Error('--cases and --batch must be positive');
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const oracle = PythonOracle.start();
  let lastProgress = performance.now();
  try {
    const report = await runDifferentialFuzz(oracle, {
      cases,
      seed,
      batchSize,
      onProgress: (done, elapsed) => {
        if (values.json || performance.now() - lastProgress < 5000) return;
        lastProgress = performance.now();
        process.stderr.write(`  ${done} / ${cases} cases, ${Math.round((done / elapsed) * 1000)} cases/s\n`);
      },
    });
    const drafts = report.disagreements.flatMap((d) => fixtureDraftFor(d, seed) ?? []);
    const written = values['no-fixtures'] ? [] : appendFixtureCases(drafts);
    process.stdout.write(values.json ? `${JSON.stringify({ ...report, fixtures: written })}\n` : `${summary(report, written)}\n`);
    return report.disagreeing === 0 ? 0 : 1;
  } finally {
    await oracle.close();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`fuzz: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
