import { describe, expect, it } from 'vitest';
import { SMOKE_BOUNDS } from './bounds.js';
import { explore } from './explore.js';
import { INVARIANTS } from './invariants.js';
import { BROKEN_VARIANTS, type BrokenVariant, type ModelState } from './model-state.js';
import { renderTimeline } from './timeline.js';
import { variantBound } from './variant-bounds.js';

/*
 * The model check inside `npm test`: every interleaving of the smoke bounds
 * is explored to the end and holds every invariant; every broken variant
 * is caught, with its counterexample printed as a timeline. The larger
 * bounds run behind `npm run verify` (src/model-cli.ts).
 */

/** Which invariant each broken rule must break first. */
const EXPECTED: Readonly<Record<BrokenVariant, string>> = {
  republish_on_not_started: 'no re-publication after a publish that may have sent',
  poller_overwrites_stored_record: 'no terminal result lost or changed',
  dispatch_ignores_blockers: 'at most one unresolved request per target',
  publish_before_intent: 'no re-publication after a publish that may have sent',
  minion_reruns_abandoned_claim: 'at most one execution per request',
  minion_takes_execution_lock_first: 'execution_busy only while another request holds the execution lock',
  status_running_between_refusal_writes: 'the minion never answers running for a request it then refuses',
};

/**
 * What the smoke bounds must reach, so that a model where some step never
 * fires cannot pass quietly. Not `quarantined`: the model binds every answer
 * exactly, so only a minion contradicting itself could quarantine, and the
 * broken variant status_running_between_refusal_writes is that path.
 */
const MUST_REACH = [
  ...['arrived', 'request_locked', 'M1', 'M2', 'M3', 'M4', 'M5', 'M6', 'R1', 'R1_index', 'R2'].map((phase) => `a minion job at ${phase}`),
  ...['prepared', 'publishing', 'published', 'running', 'succeeded', 'unknown', 'rejected', 'reconciled'].map((state) => `a record ${state}`),
  'a record rejected because the minion refused',
  'a record rejected because the minion was not ready',
  'a record prepared again after a publish that sent nothing',
  'a record publishing after an uncertain publish',
  'a request of the second dispatch recorded',
];

function reached(state: ModelState): string[] {
  const found = state.jobs.map((job) => `a minion job at ${job.phase}`);
  for (const record of state.records) {
    if (record === null) continue;
    found.push(`a record ${record.state}`);
    if (record.state === 'rejected' && record.reason?.code === 'refused') found.push('a record rejected because the minion refused');
    if (record.state === 'rejected' && record.reason?.code === 'not_ready') found.push('a record rejected because the minion was not ready');
    if (record.state === 'prepared' && record.reason?.code === 'publish_not_sent') found.push('a record prepared again after a publish that sent nothing');
    if (record.state === 'publishing' && record.reason?.code === 'publish_uncertain') found.push('a record publishing after an uncertain publish');
  }
  if (state.records.length > 1 && state.records[1] !== null) found.push('a request of the second dispatch recorded');
  return found;
}

describe('the protocol model', () => {
  const coverage = new Set<string>();

  it.each(SMOKE_BOUNDS)('holds every invariant in every interleaving of: $name', ({ name, config }) => {
    const report = explore(config, { visit: (state) => reached(state).forEach((what) => coverage.add(what)) });
    console.info(`model check, ${name}: ${report.states} states, ${report.transitions} transitions, depth ${report.depth}, ${(report.elapsedMs / 1000).toFixed(1)} s`);
    expect(report.violation, report.violation === undefined ? '' : renderTimeline(report.violation)).toBeUndefined();
    expect(report.complete).toBe(true);
    // A model that collapsed (a step that never fires) would explore a handful of states.
    expect(report.states).toBeGreaterThan(10_000);
  }, 240_000);

  it('reaches every crash point, every record state and every way to a rejection within the smoke bounds', () => {
    expect(MUST_REACH.filter((what) => !coverage.has(what))).toStrictEqual([]);
  });

  it.each(BROKEN_VARIANTS)('catches the broken variant %s with a readable counterexample', (variant) => {
    const report = explore(variantBound(variant));
    const violation = report.violation;
    if (violation === undefined) expect.fail(`${variant} was not caught (${report.states} states)`);
    const timeline = renderTimeline(violation);
    console.info(`broken variant ${variant}, caught after ${report.states} states:\n${timeline}`);
    expect(violation.invariant).toBe(EXPECTED[variant]);
    // One numbered line per step, each with its actor, then the state it left.
    const numbered = timeline.split('\n').filter((line) => /^ {0,2}\d+\. \S/.test(line));
    expect(numbered).toHaveLength(violation.steps.length);
    expect(timeline).toContain(`invariant broken: ${EXPECTED[variant]}`);
  }, 120_000);

  it('checks invariants that each name a DESIGN rule', () => {
    expect(INVARIANTS.map((i) => i.name)).toStrictEqual([
      'at most one execution per request',
      'no succeeded (or failed) without an exact bound receipt',
      'no terminal result lost or changed',
      'at most one unresolved request per target',
      'no re-publication after a publish that may have sent',
      'a request released as refused never ran',
      'execution_busy only while another request holds the execution lock',
      'the minion never answers running for a request it then refuses',
    ]);
  });
});
