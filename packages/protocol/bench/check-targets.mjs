#!/usr/bin/env node
/*
 * Regression ceilings for bench/protocol.bench.ts, checked by `npm run bench`
 * after vitest has written its --outputJson report. Exits 1 when a bench is
 * slower than its ceiling, has no ceiling, or did not run.
 * Usage: node bench/check-targets.mjs <report.json>
 *
 * Each ceiling is ~10x the slower of two means measured on the reference
 * 2-core machine (docs/benchmarks.md), so it trips on a real regression, not
 * on noise. All are far inside what an operator needs (see
 * protocol.bench.ts): polling 500 minions every 10 s is 50 answers/s, i.e.
 * 20 ms per answer.
 */
import { readFileSync } from 'node:fs';

/** Bench name → the slowest acceptable mean, in milliseconds per call. */
const TARGETS = {
  'canonicalJson(receipt)': { maxMeanMs: 0.04 },
  'parseCanonicalJson(receipt)': { maxMeanMs: 0.06 },
  'canonicalJson(high data)': { maxMeanMs: 12 },
  'parseCanonicalJson(high data)': { maxMeanMs: 20 },
  'stateDigest(high data)': { maxMeanMs: 30 },
  'reduceStateResult(60 states)': { maxMeanMs: 0.07 },
  'parseStatusAnswer(answer, binding)': { maxMeanMs: 0.04 },
  'applyEvent: full lifecycle (create + 5 events)': { maxMeanMs: 0.025 },
};

const reportPath = process.argv[2];
if (reportPath === undefined) {
  console.error('usage: node bench/check-targets.mjs <vitest bench --outputJson report>');
  process.exit(2);
}
const report = JSON.parse(readFileSync(reportPath, 'utf8'));
const results = new Map();
for (const file of report.files ?? []) {
  for (const group of file.groups ?? []) {
    for (const result of group.benchmarks ?? []) results.set(result.name, result);
  }
}

const failures = [];
const rows = [];
for (const [name, result] of results) {
  const target = TARGETS[name];
  if (target === undefined) {
    failures.push(`"${name}" has no target in bench/check-targets.mjs`);
    continue;
  }
  if (!Number.isFinite(result.mean)) {
    failures.push(`"${name}" produced no measurement (did it throw?)`);
    continue;
  }
  const ok = result.mean <= target.maxMeanMs;
  if (!ok) failures.push(`"${name}": mean ${result.mean.toFixed(4)} ms is over its ceiling of ${target.maxMeanMs} ms`);
  rows.push(
    `${ok ? 'ok  ' : 'SLOW'} ${name.padEnd(56)} mean ${result.mean.toFixed(4).padStart(9)} ms  ceiling ${String(target.maxMeanMs).padStart(6)} ms  (${(target.maxMeanMs / result.mean).toFixed(1)}x headroom)`,
  );
}
for (const name of Object.keys(TARGETS)) {
  if (!results.has(name)) failures.push(`"${name}" has a target but did not run`);
}

console.log(`\nbenchmark targets (${reportPath}):`);
for (const row of rows) console.log(`  ${row}`);
if (failures.length > 0) {
  console.error(`\n${failures.length} benchmark target(s) failed:`);
  for (const failure of failures) console.error(`  - ${failure}`);
  process.exit(1);
}
console.log(`all ${rows.length} benchmarks within their ceilings`);
