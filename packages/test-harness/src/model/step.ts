import type { ModelState } from './model-state.js';

/** One move of one actor: who, what (for the timeline), and the state after it. */
export interface Step {
  readonly actor: string;
  readonly action: string;
  readonly next: ModelState;
}
