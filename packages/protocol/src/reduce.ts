import type { TerminalStatus } from './answers.js';

/** The only facts about a state run that ever leave the minion. */
export interface ReducedResult {
  status: TerminalStatus;
  passed: number;
  total: number;
}

const UNKNOWN: ReducedResult = Object.freeze({ status: 'unknown', passed: 0, total: 0 });

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Reduces what `state.sls` / `state.high` returned to `{status, passed, total}`.
 *
 * Proof is required for a verdict: `succeeded` only when every state of a
 * non-empty mapping has `result` exactly `true`; `failed` when every `result`
 * is a boolean and at least one is `false`. Everything else — render errors
 * and conflicts (lists), strings, an empty mapping, a missing `result`, or any
 * non-boolean `result` (`null` from test mode, `1`, `"True"`), even beside a
 * `false` — is `unknown` with 0/0, because it proves neither outcome.
 */
export function reduceStateResult(stateReturn: unknown): ReducedResult {
  if (!isObject(stateReturn)) return { ...UNKNOWN };
  const states = Object.values(stateReturn);
  if (states.length === 0) return { ...UNKNOWN };
  let passed = 0;
  for (const state of states) {
    if (!isObject(state) || !Object.hasOwn(state, 'result')) return { ...UNKNOWN };
    const result = state['result'];
    if (typeof result !== 'boolean') return { ...UNKNOWN };
    if (result) passed += 1;
  }
  const total = states.length;
  return { status: passed === total ? 'succeeded' : 'failed', passed, total };
}
