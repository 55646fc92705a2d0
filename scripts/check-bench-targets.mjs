#!/usr/bin/env node
/*
 * Checks a `vitest bench --outputJson` report against a package's regression
 * ceilings (bench/targets.json: bench name → slowest acceptable mean in ms per
 * call). Exits 1 when a bench is slower than its ceiling, has no ceiling,
 * produced no measurement, or a ceiling's bench did not run — so performance
 * targets are enforced in benchmarks, never in timed unit tests. A bench
 * inside a describe block is named `<describe> > <bench>`.
 * Usage: node scripts/check-bench-targets.mjs <report.json> <targets.json>
 *
 * Retired everywhere but packages/protocol's vitest bench: every other
 * benchmark reports ratios to its floor through the result contract of
 * issue 12 (docs/benchmarks.md), which an absolute ceiling ~10x one
 * measurement cannot. Delete this once protocol's bench has moved too.
 */
import { readFileSync } from 'node:fs';

const [reportPath, targetsPath] = process.argv.slice(2);
if (reportPath === undefined || targetsPath === undefined) {
  console.error('usage: node scripts/check-bench-targets.mjs <vitest bench --outputJson report> <bench/targets.json>');
  process.exit(2);
}
const { maxMeanMs: TARGETS } = JSON.parse(readFileSync(targetsPath, 'utf8'));
const report = JSON.parse(readFileSync(reportPath, 'utf8'));
const results = new Map();
for (const file of report.files ?? []) {
  for (const group of file.groups ?? []) {
    // fullName is "<file> > <describe> > ..."; a top-level bench's group is the file alone.
    const scope = String(group.fullName ?? '').split(' > ').slice(1).join(' > ');
    for (const result of group.benchmarks ?? []) results.set(scope === '' ? result.name : `${scope} > ${result.name}`, result);
  }
}

const failures = [];
const rows = [];
for (const [name, result] of results) {
  const ceiling = TARGETS[name];
  if (ceiling === undefined) {
    failures.push(`"${name}" has no ceiling in ${targetsPath}`);
    continue;
  }
  if (!Number.isFinite(result.mean)) {
    failures.push(`"${name}" produced no measurement (did it throw?)`);
    continue;
  }
  const ok = result.mean <= ceiling;
  if (!ok) failures.push(`"${name}": mean ${result.mean.toFixed(4)} ms is over its ceiling of ${ceiling} ms`);
  rows.push(
    `${ok ? 'ok  ' : 'SLOW'} ${name.padEnd(60)} mean ${result.mean.toFixed(4).padStart(9)} ms  ceiling ${String(ceiling).padStart(6)} ms  (${(ceiling / result.mean).toFixed(1)}x headroom)`,
  );
}
for (const name of Object.keys(TARGETS)) {
  if (!results.has(name)) failures.push(`"${name}" has a ceiling but did not run`);
}

console.log(`\nbenchmark targets (${reportPath}):`);
for (const row of rows) console.log(`  ${row}`);
if (failures.length > 0) {
  console.error(`\n${failures.length} benchmark target(s) failed:`);
  for (const failure of failures) console.error(`  - ${failure}`);
  process.exit(1);
}
console.log(`all ${rows.length} benchmarks within their ceilings`);
