import { delivered } from './minion-model.js';
import { type Message, type ModelState, withItem, withoutIndex } from './model-state.js';
import type { Step } from './step.js';

/*
 * The Salt channel between master and minion: it may deliver its messages
 * in any order (delay), lose any of them, and duplicate a publication or a
 * `run` return (a bounded number of times). Status calls and their answers
 * belong to one synchronous call each, so a copy of one could never be
 * taken for another call's answer: they are lost, never duplicated.
 */

function describe(message: Message): string {
  switch (message.kind) {
    case 'publication':
      return `the publication of request ${message.r + 1}`;
    case 'ask':
      return `W${message.w + 1}'s status call for request ${message.r + 1}`;
    case 'answer':
      return `the status answer (${message.ret.status}) of request ${message.r + 1} to W${message.w + 1}`;
    case 'run_return':
      return `the run return (${message.ret.status}) of request ${message.r + 1}`;
  }
}

export function channelSteps(state: ModelState): Step[] {
  const steps: Step[] = [];
  state.messages.forEach((message, i) => {
    if (i > 0 && JSON.stringify(message) === JSON.stringify(state.messages[i - 1])) return; // a copy moves the same way
    const rest = withoutIndex(state.messages, i);
    if (message.kind === 'publication') {
      steps.push({ actor: 'salt', action: `delivers ${describe(message)}`, next: delivered({ ...state, messages: rest }, message.r) });
    }
    // Losing a status call is losing its answer: either way the worker times out and the minion wrote nothing.
    if (message.kind !== 'ask') steps.push({ actor: 'salt', action: `loses ${describe(message)}`, next: { ...state, messages: rest } });
    if ((message.kind === 'publication' || message.kind === 'run_return') && state.budget.duplications > 0) {
      steps.push({
        actor: 'salt',
        action: `duplicates ${describe(message)}`,
        next: { ...state, messages: withItem(state.messages, message), budget: { ...state.budget, duplications: state.budget.duplications - 1 } },
      });
    }
  });
  return steps;
}
