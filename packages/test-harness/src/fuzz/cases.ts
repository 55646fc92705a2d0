import fc from 'fast-check';
import type { FuzzCase } from './fuzz-case.js';
import { receiptCase, statusAnswerCase } from './gen-answers.js';
import { capabilitiesCase } from './gen-capabilities.js';
import { highDataCase } from './gen-high-data.js';
import { identityCase } from './gen-identity.js';
import { parseCase, serializeCase } from './gen-json.js';
import { reductionCase } from './gen-reduction.js';

/**
 * Every kind of fuzz case, weighted towards the text-heavy checks where two
 * parsers are most likely to differ. A case crosses to Python as JSON, so
 * what both sides see is what JSON.stringify wrote; `asSent` gives the
 * TypeScript side exactly that.
 */
export const anyFuzzCase: fc.Arbitrary<FuzzCase> = fc.oneof(
  { arbitrary: identityCase, weight: 15 },
  { arbitrary: serializeCase, weight: 12 },
  { arbitrary: parseCase, weight: 18 },
  { arbitrary: highDataCase, weight: 18 },
  { arbitrary: reductionCase, weight: 10 },
  { arbitrary: receiptCase, weight: 9 },
  { arbitrary: statusAnswerCase, weight: 10 },
  { arbitrary: capabilitiesCase, weight: 8 },
);

/** The case as both implementations receive it: through one JSON text. */
export function asSent(c: FuzzCase): FuzzCase {
  return { category: c.category, input: JSON.parse(JSON.stringify(c.input)) as unknown, label: c.label } as FuzzCase;
}
