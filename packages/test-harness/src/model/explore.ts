import { channelSteps } from './channel-model.js';
import { type Violation, stateViolation, stepViolation } from './invariants.js';
import { masterSteps } from './master-model.js';
import { minionSteps } from './minion-model.js';
import { type ModelConfig, type ModelState, initialState, stateKey } from './model-state.js';
import { stateHash } from './state-hash.js';
import type { Step } from './step.js';

/*
 * Breadth-first exploration of every interleaving of the actors' steps,
 * with states deduplicated by a 106-bit hash of their key (state-hash.ts). The budgets in
 * the configuration (duplications, crashes, refusals, reconciliations,
 * unsent calls) bound the nondeterminism; `maxDepth` can bound the
 * interleavings as well. The first violated invariant stops the search
 * and comes back as the shortest path to it (breadth first).
 */

export interface ExploreOptions {
  /** Steps from the initial state at most (default: no bound but the budgets). */
  readonly maxDepth?: number;
  /** Give up (incomplete) past this many distinct states (default 5,000,000). */
  readonly maxStates?: number;
  /** Called once for every distinct state reached (coverage checks). */
  readonly visit?: (state: ModelState) => void;
}

interface TimelineStep {
  readonly actor: string;
  readonly action: string;
  readonly state: ModelState;
}

export interface Counterexample {
  readonly invariant: string;
  readonly problem: string;
  readonly steps: readonly TimelineStep[];
}

export interface ExploreReport {
  readonly states: number;
  readonly transitions: number;
  /** The longest shortest path explored. */
  readonly depth: number;
  /** Every reachable state within the bound was explored. */
  readonly complete: boolean;
  readonly elapsedMs: number;
  readonly violation?: Counterexample;
}

/** Every step any actor can take from `state`. */
function successors(state: ModelState, config: ModelConfig): Step[] {
  return [...masterSteps(state, config), ...minionSteps(state, config), ...channelSteps(state)];
}

function hashOf(state: ModelState): string {
  return stateHash(stateKey(state));
}

/** Re-walks the recorded path (each move is its index among the successors), so the timeline carries every state (not kept during the search). */
function replay(config: ModelConfig, path: readonly number[]): TimelineStep[] {
  let state = initialState(config);
  const steps: TimelineStep[] = [];
  for (const index of path) {
    const step = successors(state, config)[index];
    if (step === undefined) throw new Error('the counterexample path does not replay');
    state = step.next;
    steps.push({ actor: step.actor, action: step.action, state });
  }
  return steps;
}

export function explore(config: ModelConfig, options: ExploreOptions = {}): ExploreReport {
  const started = performance.now();
  const maxStates = options.maxStates ?? 5_000_000;
  const maxDepth = options.maxDepth ?? Number.POSITIVE_INFINITY;
  const initial = initialState(config);
  const seen = new Set<string>([hashOf(initial)]);
  // Per state (by discovery order): its parent and which of the parent's successors led to it.
  const parents: number[] = [-1];
  const moves: number[] = [-1];
  let frontier: Array<{ id: number; state: ModelState }> = [{ id: 0, state: initial }];
  let transitions = 0;
  let depth = 0;
  let complete = true;

  /** The path to state `id` (and one more move), replayed into a timeline. */
  const counterexample = (id: number, broken: Violation, last?: number): ExploreReport => {
    const path: number[] = last === undefined ? [] : [last];
    for (let at = id; at > 0; at = parents[at] as number) path.unshift(moves[at] as number);
    const violation = { invariant: broken.invariant, problem: broken.problem, steps: replay(config, path) };
    return { states: seen.size, transitions, depth, complete: false, elapsedMs: performance.now() - started, violation };
  };

  const first = stateViolation(initial);
  if (first !== undefined) return counterexample(0, first);
  options.visit?.(initial);

  while (frontier.length > 0) {
    if (depth >= maxDepth) {
      complete = false;
      break;
    }
    const next: typeof frontier = [];
    for (const { id, state } of frontier) {
      const steps = successors(state, config);
      for (let index = 0; index < steps.length; index += 1) {
        const step = steps[index] as Step;
        transitions += 1;
        // A step invariant holds on every transition, also one into a state seen before.
        const stepBroken = stepViolation(state, step.next);
        if (stepBroken !== undefined) return counterexample(id, stepBroken, index);
        const hash = hashOf(step.next);
        if (seen.has(hash)) continue;
        seen.add(hash);
        const child = parents.length;
        parents.push(id);
        moves.push(index);
        const broken = stateViolation(step.next);
        if (broken !== undefined) return counterexample(child, broken);
        options.visit?.(step.next);
        next.push({ id: child, state: step.next });
      }
      if (seen.size > maxStates) return { states: seen.size, transitions, depth, complete: false, elapsedMs: performance.now() - started };
    }
    frontier = next;
    if (next.length > 0) depth += 1;
  }
  return { states: seen.size, transitions, depth, complete, elapsedMs: performance.now() - started };
}
