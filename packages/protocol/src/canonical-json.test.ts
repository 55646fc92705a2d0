import fc from 'fast-check';
import stableStringify from 'fast-json-stable-stringify';
import { describe, expect, it } from 'vitest';
import { type JsonValue, canonicalJson, isCanonicalJsonValue, parseCanonicalJson } from './canonical-json.js';
import { MAX_JSON_DEPTH } from './constants.js';
import { ProtocolError } from './errors.js';
import { textNestingDepth } from './text-depth.js';
import { codeOf } from '../tests/support.js';

/** Fixed so CI is reproducible; fast-check prints the seed and counterexample path when a property fails. */
const SEED = 20_261_129;
const RUNS = { seed: SEED, numRuns: 300 };


// Characters where serializers usually disagree, mixed with arbitrary well-formed code points.
const TRAP_CHARACTERS = ['"', '\\', '/', '\u0000', '\u0008', '\t', '\n', '\u000b', '\u001f', '\u007f', '\u2028', '\u2029', '\ue000', '\uffff', '\u00e9', '😀', 'a', '1'];
const domainString = fc.oneof(fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ unit: fc.constantFrom(...TRAP_CHARACTERS), maxLength: 8 }));
const domainInteger = fc.oneof(fc.maxSafeInteger(), fc.constantFrom(0, 1, -1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER));
const { value: domainValue, object: domainObject } = fc.letrec<{ value: JsonValue; array: JsonValue[]; object: Record<string, JsonValue> }>((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), domainInteger, domainString, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(domainString, tie('value'), { maxKeys: 4, noNullPrototype: true }),
}));

describe('canonicalJson', () => {
  it('sorts keys by UTF-16 code units, so an astral key comes before U+FFFF and "10" before "2"', () => {
    expect(canonicalJson({ '\uffff': 1, '😀': 2, '2': 3, '10': 4 })).toBe('{"10":4,"2":3,"😀":2,"\uffff":1}');
  });

  it('escapes only quote, backslash and C0 controls, with short forms where they exist', () => {
    expect(canonicalJson('"\\\b\f\n\r\t\u0000\u001f/\u007f\u2028\u2029')).toBe('"\\"\\\\\\b\\f\\n\\r\\t\\u0000\\u001f/\u007f\u2028\u2029"');
  });

  it.each([
    ['a fraction', 1.5],
    ['-0', -0],
    ['2^53', 2 ** 53],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['a bigint', 1n],
    ['undefined', undefined],
    ['a function', () => 1],
    ['a symbol', Symbol('x')],
    ['a Date', new Date(0)],
    ['a Map', new Map()],
    ['a class instance', new (class Box {
      readonly content = 1;
    })()],
    ['a boxed string', Object('x') as unknown],
    ['a lone high surrogate', '\ud800'],
    ['a lone surrogate key', { '\udc00': 1 }],
    ['an undefined member', { a: undefined }],
    // eslint-disable-next-line no-sparse-arrays -- the hole is what this case is about
    ['a sparse array', [1, , 3]],
    ['a symbol-keyed member', { [Symbol('k')]: 1 }],
    ['a toJSON method', { toJSON: () => 1 }],
  ])('refuses %s as unsupported_json_value', (_name, value) => {
    expect(codeOf(() => canonicalJson(value))).toBe('unsupported_json_value');
  });

  it('refuses a cycle instead of overflowing', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(codeOf(() => canonicalJson(cyclic))).toBe('unsupported_json_value');
  });

  it('accepts the same object twice when it is not its own ancestor', () => {
    const shared = { a: 1 };
    expect(canonicalJson([shared, shared])).toBe('[{"a":1},{"a":1}]');
  });

  it('accepts objects with a null prototype and a "__proto__" own key', () => {
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { b: 1, a: 2 });
    expect(canonicalJson(bare)).toBe('{"a":2,"b":1}');
    expect(canonicalJson(JSON.parse('{"__proto__":1}'))).toBe('{"__proto__":1}');
  });

  it('does not echo the value in its error message', () => {
    const secret = { password: 'hunter2', bad: 0.5 };
    expect(() => canonicalJson(secret)).toThrow(expect.objectContaining({ message: expect.not.stringContaining('hunter2') as unknown }));
  });
});

describe('the nesting bound (MAX_JSON_DEPTH)', () => {
  function nestedArray(depth: number): unknown {
    let value: unknown = [];
    for (let level = 1; level < depth; level += 1) value = [value];
    return value;
  }
  function nestedObject(depth: number): unknown {
    let value: unknown = {};
    for (let level = 1; level < depth; level += 1) value = { k: value };
    return value;
  }

  it('is 100', () => {
    expect(MAX_JSON_DEPTH).toBe(100);
  });

  it('serializes and parses depth 100 and refuses depth 101', () => {
    for (const nested of [nestedArray, nestedObject]) {
      const text = canonicalJson(nested(100));
      expect(parseCanonicalJson(text)).toStrictEqual(nested(100));
      expect(codeOf(() => canonicalJson(nested(101)))).toBe('unsupported_json_value');
      expect(codeOf(() => parseCanonicalJson(canonicalJson(nested(100)).replace(/^(.)/, '[$1').concat(']')))).toBe('non_canonical_json');
    }
  });

  it('refuses absurd depths without overflowing the stack', () => {
    expect(codeOf(() => canonicalJson(nestedArray(200_000)))).toBe('unsupported_json_value');
    expect(codeOf(() => parseCanonicalJson('['.repeat(2000) + ']'.repeat(2000)))).toBe('non_canonical_json');
    expect(codeOf(() => parseCanonicalJson('['.repeat(200_000) + ']'.repeat(200_000)))).toBe('non_canonical_json');
  });

  it('scans the text, so brackets inside strings do not count', () => {
    const text = canonicalJson(['['.repeat(500)]);
    expect(parseCanonicalJson(text)).toStrictEqual(['['.repeat(500)]);
  });
});

describe('parseCanonicalJson', () => {
  it('returns the value of canonical text', () => {
    expect(parseCanonicalJson('{"a":[1,true,null,"x"]}')).toStrictEqual({ a: [1, true, null, 'x'] });
  });

  it.each([
    ['not a string', 1],
    ['not JSON', '{'],
    ['1.0', '1.0'],
    ['-0', '-0'],
    ['1e2', '1e2'],
    ['2^53', '9007199254740992'],
    ['a duplicate key', '{"a":1,"a":1}'],
    ['whitespace', '{"a": 1}'],
    ['a trailing newline', '{}\n'],
    ['an escaped letter', '"\\u0041"'],
    ['an escaped slash', '"\\/"'],
    ['an escaped lone surrogate', '"\\ud800"'],
  ])('refuses %s as non_canonical_json', (_name, text) => {
    expect(codeOf(() => parseCanonicalJson(text))).toBe('non_canonical_json');
  });

  it('round-trips every value of the domain', () => {
    fc.assert(
      fc.property(domainValue, (value) => {
        const text = canonicalJson(value);
        expect(parseCanonicalJson(text)).toStrictEqual(value);
        expect(isCanonicalJsonValue(value)).toBe(true);
      }),
      RUNS,
    );
  });

  it('rejects canonical text with whitespace inserted between tokens', () => {
    const whitespace = fc.constantFrom(' ', '\n', '\t', '\r', '\r\n');
    fc.assert(
      fc.property(domainValue, whitespace, fc.nat(), (value, space, pick) => {
        const text = canonicalJson(value);
        const boundaries = tokenBoundaries(text);
        const at = boundaries[pick % boundaries.length] ?? 0;
        expect(codeOf(() => parseCanonicalJson(text.slice(0, at) + space + text.slice(at)))).toBe('non_canonical_json');
      }),
      RUNS,
    );
  });

  it('rejects an object whose keys are not in UTF-16 order', () => {
    const twoOrMoreKeys = domainObject.filter((object) => Object.keys(object).length >= 2);
    fc.assert(
      fc.property(twoOrMoreKeys, (object) => {
        const descending = Object.keys(object).sort().reverse();
        const text = `{${descending.map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`).join(',')}}`;
        expect(codeOf(() => parseCanonicalJson(text))).toBe('non_canonical_json');
      }),
      RUNS,
    );
  });

  it('rejects a duplicated member, even in sorted position', () => {
    const nonEmpty = domainObject.filter((object) => Object.keys(object).length >= 1);
    fc.assert(
      fc.property(nonEmpty, fc.nat(), (object, pick) => {
        const members = Object.keys(object)
          .sort()
          .map((key) => `${JSON.stringify(key)}:${canonicalJson(object[key])}`);
        const index = pick % members.length;
        members.splice(index, 0, members[index] ?? '');
        expect(codeOf(() => parseCanonicalJson(`{${members.join(',')}}`))).toBe('non_canonical_json');
      }),
      RUNS,
    );
  });

  it('rejects a character written as an escape the canonical form does not use', () => {
    // [character, its escaped spelling that canonical JSON never produces]
    const needlessEscapes = fc.constantFrom(
      ['A', '\\u0041'],
      ['/', '\\/'],
      ['\u00e9', '\\u00e9'],
      ['\u2028', '\\u2028'],
      ['\u007f', '\\u007f'],
      ['\n', '\\u000a'],
      ['\u001f', '\\u001F'],
      ['"', '\\u0022'],
      ['\\', '\\u005c'],
      ['😀', '\\ud83d\\ude00'],
    );
    const plain = fc.string({ unit: fc.constantFrom('a', 'b', 'z', '0'), maxLength: 4 });
    fc.assert(
      fc.property(domainValue, plain, needlessEscapes, plain, (value, before, [character, escaped], after) => {
        const canonical = canonicalJson([value, before + character + after]);
        const inner = JSON.stringify(character).slice(1, -1);
        expect(canonical).toBe(`[${canonicalJson(value)},"${before}${inner}${after}"]`);
        const variant = `[${canonicalJson(value)},"${before}${escaped}${after}"]`;
        expect(codeOf(() => parseCanonicalJson(variant))).toBe('non_canonical_json');
      }),
      RUNS,
    );
  });

  it('rejects integers spelled as fractions, exponents, -0, with a sign or leading zeros, or beyond 2^53-1', () => {
    const spelling = fc.oneof(
      fc.maxSafeInteger().chain((n) => fc.constantFrom(`${n}.0`, `${n}e0`, `${n}E0`, `${n}.00`, `${n}e+0`)),
      fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }).chain((n) => fc.constantFrom(`0${n}`, `+${n}`)),
      fc.constantFrom('-0', '-0.0', '1e2', '9007199254740992', '9007199254740993', '-9007199254740992', '1e16', 'NaN', 'Infinity'),
    );
    fc.assert(
      fc.property(domainValue, spelling, (value, number) => {
        expect(codeOf(() => parseCanonicalJson(`[${canonicalJson(value)},${number}]`))).toBe('non_canonical_json');
      }),
      RUNS,
    );
  });
});

/** Offsets in canonical `text` outside string literals where inserting whitespace keeps it valid JSON. */
function tokenBoundaries(text: string): number[] {
  const offsets = [0, text.length];
  let inString = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (inString) {
      if (char === '\\') index += 1;
      else if (char === '"') {
        inString = false;
        offsets.push(index + 1);
      }
    } else if (char === '"') {
      offsets.push(index);
      inString = true;
    } else if (char !== undefined && '{}[],:'.includes(char)) offsets.push(index, index + 1);
  }
  return offsets;
}

/**
 * The definitions the quick paths must agree with: the domain walk, then
 * fast-json-stable-stringify (serialize), and byte equality with that (parse).
 */
function referenceSerialize(value: unknown): string | undefined {
  return isCanonicalJsonValue(value) ? stableStringify(value) : undefined;
}
function referenceParse(text: string): unknown {
  if (textNestingDepth(text) > MAX_JSON_DEPTH) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  return referenceSerialize(parsed) === text ? parsed : undefined;
}
function outcome(fn: () => unknown): unknown {
  try {
    return { ok: fn() };
  } catch (error) {
    if (ProtocolError.isInstance(error)) return { error: error.code };
    throw error;
  }
}

describe('the native quick paths', () => {
  // Keys that V8 enumerates out of insertion order, and texts that hold `\ud` without a surrogate.
  const trickyKey = fc.constantFrom('0', '1', '2', '9', '10', '4294967294', '4294967295', '-1', '01', '\\ud800', '__proto__', 'toJSON', 'a');
  const { value: trickyValue } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      domainValue,
      fc.dictionary(fc.oneof(trickyKey, domainString), tie('value'), { maxKeys: 5, noNullPrototype: true }),
      fc.array(tie('value'), { maxLength: 4 }),
      fc.constantFrom(1.5, -0, 2 ** 53, '\ud800', '\\ud800', '\udc00x'),
    ),
  }));

  it('serialize exactly as the domain walk and fast-json-stable-stringify, sorted keys or not', () => {
    fc.assert(
      fc.property(trickyValue, (value) => {
        const expected = referenceSerialize(value);
        expect(outcome(() => canonicalJson(value))).toStrictEqual(expected === undefined ? { error: 'unsupported_json_value' } : { ok: expected });
        // A value parsed back from its canonical text enumerates its keys sorted (integer-like keys aside).
        if (expected !== undefined) expect(canonicalJson(JSON.parse(expected))).toBe(expected);
      }),
      { ...RUNS, numRuns: 1000 },
    );
  });

  it('parse exactly as byte equality with the canonical serialization, on canonical texts and their near misses', () => {
    const edit = fc.constantFrom('', ' ', '\\ud800', '\\\\', '\\"', '"', '1.0', '-0', '[', ']', '{', '}', ',', '"10":1', '"9":1', 'e2');
    fc.assert(
      fc.property(trickyValue, edit, fc.nat(), fc.nat(3), (value, insert, at, cut) => {
        const text = (JSON.stringify(value) as string | undefined) ?? 'null';
        const canonical = referenceSerialize(value) ?? text;
        for (const candidate of [text, canonical, canonical.slice(0, at % (canonical.length + 1)) + insert + canonical.slice((at % (canonical.length + 1)) + cut)]) {
          const expected = referenceParse(candidate);
          expect(outcome(() => parseCanonicalJson(candidate))).toStrictEqual(expected === undefined ? { error: 'non_canonical_json' } : { ok: expected });
        }
      }),
      { ...RUNS, numRuns: 1000 },
    );
  });

  it('accept integer-like keys in UTF-16 order, which V8 enumerates in numeric order', () => {
    expect(parseCanonicalJson('{"10":1,"9":2}')).toStrictEqual({ '10': 1, '9': 2 });
    expect(canonicalJson({ '9': 2, '10': 1 })).toBe('{"10":1,"9":2}');
    expect(codeOf(() => parseCanonicalJson('{"9":2,"10":1}'))).toBe('non_canonical_json');
  });

  it('tell an escaped backslash before "ud800" from an escaped lone surrogate', () => {
    expect(parseCanonicalJson('"\\\\ud800"')).toBe('\\ud800');
    expect(canonicalJson('\\ud800')).toBe('"\\\\ud800"');
    expect(codeOf(() => parseCanonicalJson('"\\ud800"'))).toBe('non_canonical_json');
    expect(codeOf(() => canonicalJson({ a: '\ud800' }))).toBe('unsupported_json_value');
  });
});

describe('textNestingDepth', () => {
  /** The scanner as docs/protocol-rules.md states it, one code unit at a time. */
  function referenceDepth(text: string): number {
    let depth = 0;
    let maxDepth = 0;
    let inString = false;
    for (let index = 0; index < text.length; index += 1) {
      const char = text[index];
      if (inString) {
        if (char === '\\') index += 1;
        else if (char === '"') inString = false;
      } else if (char === '"') inString = true;
      else if (char === '{' || char === '[') maxDepth = Math.max(maxDepth, (depth += 1));
      else if (char === '}' || char === ']') depth -= 1;
    }
    return maxDepth;
  }

  it('agrees with the unit-by-unit scan on any text, escapes and unterminated strings included', () => {
    const unit = fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ',', '\u00e9', '\ud800', '😀');
    fc.assert(
      fc.property(fc.string({ unit, maxLength: 40 }), (text) => {
        expect(textNestingDepth(text)).toBe(referenceDepth(text));
      }),
      { ...RUNS, numRuns: 3000 },
    );
  });
});
