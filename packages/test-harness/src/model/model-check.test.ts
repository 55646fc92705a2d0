import { describe, expect, it } from 'vitest';
import { SMOKE_BOUNDS } from './bounds.js';
import { explore } from './explore.js';
import { INVARIANTS } from './invariants.js';
import { BROKEN_VARIANTS, type BrokenVariant } from './model-state.js';
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
};

describe('the protocol model', () => {
  it.each(SMOKE_BOUNDS)('holds every invariant in every interleaving of: $name', ({ name, config }) => {
    const report = explore(config);
    console.info(`model check, ${name}: ${report.states} states, ${report.transitions} transitions, depth ${report.depth}, ${(report.elapsedMs / 1000).toFixed(1)} s`);
    expect(report.violation, report.violation === undefined ? '' : renderTimeline(report.violation)).toBeUndefined();
    expect(report.complete).toBe(true);
    // A model that collapsed (a step that never fires) would explore a handful of states.
    expect(report.states).toBeGreaterThan(10_000);
  }, 240_000);

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
    ]);
  });
});
