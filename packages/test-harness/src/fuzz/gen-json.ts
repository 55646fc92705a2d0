import fc from 'fast-check';
import { MAX_JSON_DEPTH } from '@oduflow/protocol';
import { type FuzzCase, fuzzCase } from './fuzz-case.js';
import { isWellFormedText, trickyKey, trickyString, wellFormedString } from './gen-text.js';
import { DEVIATIONS, type Plan, misSerialize } from './mis-serialize.js';

/*
 * Values in and just outside the canonical JSON domain, and texts that are
 * canonical, almost canonical or not JSON at all (canonical_json cases).
 * Values cross to Python as JSON text, so what a case holds is what
 * JSON.stringify wrote: -0 arrives as 0 in both languages, and number
 * spellings (1.0, 1e2, -0) are probed as texts, never as values.
 */

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** Integers at and past ±(2^53−1), fractions, and doubles beyond the exponent threshold of JSON.stringify. */
const edgeNumber: fc.Arbitrary<number> = fc.oneof(
  { arbitrary: fc.integer({ min: -1000, max: 1000 }), weight: 4 },
  { arbitrary: fc.constantFrom(0, MAX_SAFE, -MAX_SAFE, MAX_SAFE - 1, MAX_SAFE + 1, -(MAX_SAFE + 1), MAX_SAFE + 3, 2 ** 60, 1e20, 1e21, -1e21, 1e300), weight: 2 },
  { arbitrary: fc.constantFrom(0.5, -0.5, 1.5, 0.1, 1e-7, 5e-324, 1.7976931348623157e308), weight: 1 },
  { arbitrary: fc.maxSafeInteger(), weight: 1 },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
);

const domainLeaf: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false),
  fc.maxSafeInteger(),
  fc.integer({ min: -10, max: 10 }),
  wellFormedString,
);

const nearLeaf: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom(null, true, false), weight: 1 },
  { arbitrary: edgeNumber, weight: 2 },
  { arbitrary: trickyString, weight: 3 },
);

function tree(leaf: fc.Arbitrary<unknown>, key: fc.Arbitrary<string>, maxDepth: number): fc.Arbitrary<unknown> {
  return fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
    value: fc.oneof({ depthSize: 'small', maxDepth }, leaf, tie('array'), tie('object')),
    array: fc.array(tie('value'), { maxLength: 4 }),
    object: fc.dictionary(key, tie('value'), { maxKeys: 4, noNullPrototype: true }),
  })).value;
}

const wellFormedKey = trickyKey.filter(isWellFormedText);

/** A value inside the domain (safe integers, well-formed strings), nested a few levels. */
export const domainValue: fc.Arbitrary<unknown> = tree(domainLeaf, wellFormedKey, 4);

/** A value in or near the domain: edge numbers, lone surrogates, odd keys. */
export const nearDomainValue: fc.Arbitrary<unknown> = tree(nearLeaf, trickyKey, 4);

/** `depth` containers around a leaf (arrays and single-key objects mixed), optionally beside a sibling. */
export function nested(depth: fc.Arbitrary<number>, leaf: fc.Arbitrary<unknown> = domainLeaf): fc.Arbitrary<unknown> {
  return fc.tuple(depth, fc.array(fc.boolean(), { minLength: 128, maxLength: 128 }), leaf, fc.boolean()).map(([n, kinds, inner, sibling]) => {
    let value: unknown = inner;
    for (let i = 0; i < n; i += 1) value = kinds[i] === true ? [value] : { k: value };
    return sibling ? [0, value] : value;
  });
}

/** Nesting just below, at and above MAX_JSON_DEPTH. */
const nearDepthLimit = fc.integer({ min: MAX_JSON_DEPTH - 3, max: MAX_JSON_DEPTH + 3 });

export const serializeCase: fc.Arbitrary<FuzzCase> = fc.oneof(
  { arbitrary: domainValue.map((value) => fuzzCase('canonical_json', { op: 'serialize', value }, 'serialize a value in the canonical domain')), weight: 3 },
  { arbitrary: nearDomainValue.map((value) => fuzzCase('canonical_json', { op: 'serialize', value }, 'serialize a value near the canonical domain')), weight: 4 },
  { arbitrary: nested(nearDepthLimit).map((value) => fuzzCase('canonical_json', { op: 'serialize', value }, 'serialize a value nested near the depth limit')), weight: 1 },
);

export const plan: fc.Arbitrary<Plan> = fc.record({ deviation: fc.constantFrom(...DEVIATIONS), node: fc.nat(64), detail: fc.nat(64) });

/** Whole-text spellings of single numbers and literals. */
const NUMBER_TEXTS = [
  '0', '-0', '1', '1.0', '1e2', '1E2', '1e0', '100', '01', '+1', '1.', '.1', '-', '0.0', '-0.0', '1e-0',
  '9007199254740991', '-9007199254740991', '9007199254740992', '-9007199254740992', '9007199254740993',
  '12345678901234567890', '1e400', '-1e400', '4.9e-324', 'NaN', 'Infinity', '-Infinity', 'true', 'false',
  'null', 'True', 'None', 'nul', '0x10', '1_000', '١', '１',
] as const;

/** Structural edits of a text as a whole: framing, encoding marks, truncation. */
const TEXT_EDITS: ReadonlyArray<readonly [string, (text: string, n: number) => string]> = [
  ['leading whitespace', (t) => ` ${t}`],
  ['trailing newline', (t) => `${t}\n`],
  ['byte order mark', (t) => `\ufeff${t}`],
  ['trailing garbage', (t) => `${t}x`],
  ['two values', (t) => `${t}${t}`],
  ['truncated', (t, n) => t.slice(0, n % Math.max(t.length, 1))],
  ['wrapped in a string', (t) => JSON.stringify(t)],
  ['a comment', (t) => `/**/${t}`],
];

/** Deep bracket texts: just under, at and over the limit, with brackets and escaped quotes inside strings. */
function depthText(depth: number, style: number): string {
  switch (style % 5) {
    case 0:
      return '['.repeat(depth) + ']'.repeat(depth);
    case 1:
      return '{"a":'.repeat(depth - 1) + '{}' + '}'.repeat(depth - 1);
    case 2:
      // Brackets in a string do not nest.
      return '['.repeat(depth - 1) + '"[[[[{{{{"' + ']'.repeat(depth - 1);
    case 3:
      // An escaped quote does not end the string, so the brackets after it are still inside it.
      return '['.repeat(depth - 1) + '"\\"[[[["' + ']'.repeat(depth - 1);
    default:
      // An escaped backslash does end it: what follows nests.
      return `["\\\\",${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}]`;
  }
}

const jsonText: fc.Arbitrary<{ text: string; label: string }> = fc.oneof(
  { arbitrary: domainValue.chain((value) => plan.map((p) => ({ text: misSerialize(value, p), label: `a text with deviation ${p.deviation}` }))), weight: 8 },
  { arbitrary: nearDomainValue.chain((value) => plan.map((p) => ({ text: misSerialize(value, p), label: `a text of a value near the domain, deviation ${p.deviation}` }))), weight: 3 },
  { arbitrary: fc.constantFrom(...NUMBER_TEXTS).map((text) => ({ text, label: 'a number or literal spelling' })), weight: 2 },
  {
    arbitrary: fc.tuple(domainValue, fc.constantFrom(...TEXT_EDITS), fc.nat(200)).map(([value, [name, edit], n]) => ({
      text: edit(misSerialize(value, { deviation: 'none', node: 0, detail: 0 }), n),
      label: `a text edited: ${name}`,
    })),
    weight: 2,
  },
  {
    arbitrary: fc.tuple(nearDepthLimit, fc.nat(4)).map(([depth, style]) => ({ text: depthText(depth, style), label: 'a text nested near the depth limit' })),
    weight: 1,
  },
  { arbitrary: trickyString.map((text) => ({ text, label: 'an arbitrary short text' })), weight: 1 },
);

export const parseCase: fc.Arbitrary<FuzzCase> = jsonText.map(({ text, label }) => fuzzCase('canonical_json', { op: 'parse', text }, `parse ${label}`));
