#!/usr/bin/env node
/*
 * `node packages/test-harness/dist/model-cli.js [--bounds smoke|full] [--max-states N] [--json]`:
 * the explicit-state model check of the protocol. Explores every bound
 * completely and checks the invariants; then checks that each broken
 * variant is caught. Exit 0 only when every bound holds, was explored to
 * the end, and every broken variant was caught; 1 otherwise; 2 on a usage error.
 */
import { parseArgs } from 'node:util';
import { FULL_BOUNDS, SMOKE_BOUNDS } from './model/bounds.js';
import { type ExploreReport, explore } from './model/explore.js';
import { BROKEN_VARIANTS } from './model/model-state.js';
import { renderTimeline } from './model/timeline.js';
import { variantBound } from './model/variant-bounds.js';

const USAGE = 'usage: model-cli [--bounds smoke|full] [--max-states N] [--json]';

function line(name: string, report: ExploreReport): string {
  return `${name}: ${report.states} states, ${report.transitions} transitions, depth ${report.depth}, ${report.complete ? 'complete' : 'INCOMPLETE'}, ${(report.elapsedMs / 1000).toFixed(1)} s`;
}

function main(): number {
  let values;
  try {
    ({ values } = parseArgs({ options: { bounds: { type: 'string', default: 'full' }, 'max-states': { type: 'string' }, json: { type: 'boolean', default: false } }, strict: true }));
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.bounds !== 'smoke' && values.bounds !== 'full') {
    process.stderr.write(`--bounds is smoke or full\n${USAGE}\n`);
    return 2;
  }
  const maxStates = values['max-states'] === undefined ? undefined : Number(values['max-states']);
  if (maxStates !== undefined && !Number.isSafeInteger(maxStates)) {
    process.stderr.write(`--max-states must be an integer\n${USAGE}\n`);
    return 2;
  }
  const options = maxStates === undefined ? {} : { maxStates };
  const results: Array<{ name: string; report: ExploreReport; ok: boolean }> = [];
  for (const bound of values.bounds === 'smoke' ? SMOKE_BOUNDS : FULL_BOUNDS) {
    const report = explore(bound.config, options);
    const ok = report.complete && report.violation === undefined;
    results.push({ name: bound.name, report, ok });
    if (!values.json) {
      process.stdout.write(`${line(bound.name, report)}\n`);
      if (report.violation !== undefined) process.stdout.write(`${renderTimeline(report.violation)}\n`);
    }
  }
  for (const variant of BROKEN_VARIANTS) {
    const report = explore(variantBound(variant), options);
    const ok = report.violation !== undefined;
    results.push({ name: `broken variant ${variant}`, report, ok });
    if (!values.json) process.stdout.write(`broken variant ${variant}: ${ok ? `caught after ${report.states} states (${report.violation.steps.length} steps): ${report.violation.invariant}` : 'NOT CAUGHT'}\n`);
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(results.map(({ name, report, ok }) => ({ name, ok, ...report, violation: report.violation && { invariant: report.violation.invariant, problem: report.violation.problem, steps: report.violation.steps.length } })))}\n`);
  }
  return results.every((r) => r.ok) ? 0 : 1;
}

process.exitCode = main();
