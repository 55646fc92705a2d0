import type { ProtocolCategory } from '../fixture-runners.js';
import type { FixtureInput } from '../fixtures.js';

/**
 * One generated question for both implementations: a fixture category and its
 * input (the shape of fixtures/README.md), and what the generator meant to
 * probe, for the fixture description of a case that disagrees.
 */
export type FuzzCase = {
  [C in ProtocolCategory]: { readonly category: C; readonly input: FixtureInput<C>; readonly label: string };
}[ProtocolCategory];

export function fuzzCase<C extends ProtocolCategory>(category: C, input: FixtureInput<C>, label: string): FuzzCase {
  return { category, input, label } as FuzzCase;
}
