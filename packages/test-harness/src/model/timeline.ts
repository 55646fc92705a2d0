import type { ModelState } from './model-state.js';
import type { Counterexample } from './explore.js';

/*
 * A counterexample as a timeline an operator can read: one line per step,
 * the actor, what it did, and then what the records, the minion's evidence
 * and the channel hold afterwards.
 */

function records(state: ModelState): string {
  return state.records.map((record, r) => `${r + 1}:${record === null ? '-' : record.state}`).join(' ');
}

function evidence(state: ModelState): string {
  return state.evidence
    .map((e, r) => {
      const parts = [e.index ? 'index' : '', e.record === null ? '' : e.record.status].filter((p) => p !== '');
      return `${r + 1}:${parts.length === 0 ? '-' : parts.join('+')}`;
    })
    .join(' ');
}

function jobs(state: ModelState): string {
  return state.jobs.length === 0 ? '' : ` jobs ${state.jobs.map((j) => `${j.r + 1}@${j.phase}`).join(',')}`;
}

function channel(state: ModelState): string {
  const parts = state.messages.map((m) => {
    switch (m.kind) {
      case 'publication':
        return `pub ${m.r + 1}`;
      case 'ask':
        return `ask ${m.r + 1}<W${m.w + 1}`;
      case 'answer':
        return `answer ${m.r + 1}>W${m.w + 1} ${m.ret.status}`;
      case 'run_return':
        return `return ${m.r + 1} ${m.ret.status}`;
    }
  });
  return parts.length === 0 ? '-' : parts.join(', ');
}

/** The state in one line: records | minion evidence and jobs (ran n times) | channel. */
function summarize(state: ModelState): string {
  return `records ${records(state)} | minion ${evidence(state)}${jobs(state)} ran ${state.executions.join('/')} | channel ${channel(state)}`;
}

export function renderTimeline(counterexample: Counterexample): string {
  const width = Math.max(...counterexample.steps.map((s) => s.actor.length), 5);
  const lines = counterexample.steps.map((step, i) => `${String(i + 1).padStart(3)}. ${step.actor.padEnd(width)}  ${step.action}\n     ${' '.repeat(width)}  -> ${summarize(step.state)}`);
  return [`invariant broken: ${counterexample.invariant}`, `  ${counterexample.problem}`, ...lines].join('\n');
}
