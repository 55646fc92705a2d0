#!/usr/bin/env node
/*
 * Regression ceilings for bench/receipt-store.bench.ts, checked by
 * `npm run bench` after vitest has written its --outputJson report. Exits 1
 * when a bench is slower than its ceiling, has no ceiling, or did not run.
 * Usage: node bench/check-targets.mjs <report.json>
 *
 * Each ceiling is ~10x the slower of two means measured on the reference
 * 2-core machine (docs/benchmarks.md), so it trips on a real regression, not
 * on noise. The fsync-bound writes get 10 ms (~13x), which is also the
 * operator's need: a master recording 500 poll results per 10 s round must
 * spend at most half the round writing them.
 */
import { readFileSync } from 'node:fs';

/** Bench name → the slowest acceptable mean, in milliseconds per call. */
const TARGETS = {
  'writeJsonAtomic: new name (no replace)': { maxMeanMs: 10 },
  'writeJsonAtomic: replace': { maxMeanMs: 10 },
  'readJson(receipt)': { maxMeanMs: 0.08 },
  'tryLockSync + release': { maxMeanMs: 0.2 },
  'lock (wait 1 s, free) + release': { maxMeanMs: 0.2 },
  // Dominated by the waiter's first 1 ms backoff; 12 ms catches a backoff or busy-wait regression.
  'lock (wait 1 s, held, released on next tick) + release': { maxMeanMs: 12 },
  'openPrivateDir(3 levels below the temp dir) + close': { maxMeanMs: 0.25 },
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
