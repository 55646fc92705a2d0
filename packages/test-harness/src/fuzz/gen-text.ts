import fc from 'fast-check';

/*
 * Characters and strings where JSON serializers and regex engines tend to
 * differ: escapes, control characters, the line separators JSON allows raw,
 * non-ASCII digits and look-alikes, BMP characters above the surrogates
 * (which sort differently by UTF-16 code unit and by code point), astral
 * characters, and lone surrogates.
 */

export const LONE_HIGH = '\ud800';
const LONE_LOW = '\udc00';

/** Units a string is built from; each is one or two UTF-16 code units. */
const TRICKY_UNITS = [
  'a',
  'b',
  'z',
  'A',
  '0',
  '1',
  '9',
  ' ',
  '.',
  '_',
  '-',
  '/',
  '"',
  '\\',
  '[',
  ']',
  '{',
  '}',
  ':',
  ',',
  '\u0000',
  '\b',
  '\t',
  '\n',
  '\f',
  '\r',
  '\u001f',
  '\u007f',
  '\u0080',
  '\u009f',
  '\u00a0',
  'é',
  'ß',
  '\u0660', // ARABIC-INDIC DIGIT ZERO
  '\uff10', // FULLWIDTH DIGIT ZERO
  '\u0430', // CYRILLIC SMALL LETTER A
  '\u2028',
  '\u2029',
  '中',
  '\ue000', // above the surrogates: sorts after an astral character by UTF-16 unit, before it by code point
  '\ufeff',
  '\ufffd',
  '\uffff',
  '\u{10000}',
  '\u{1f600}',
  '\u{10ffff}',
  LONE_HIGH,
  LONE_LOW,
  '\udbff',
  '\udfff',
] as const;

const trickyUnit: fc.Arbitrary<string> = fc.constantFrom(...TRICKY_UNITS);

/** Mostly plain ASCII letters, with a tricky unit now and then. */
const textUnit: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'.split('')), weight: 3 },
  { arbitrary: trickyUnit, weight: 2 },
);

function textOf(unit: fc.Arbitrary<string>, maxLength: number, minLength = 0): fc.Arbitrary<string> {
  return fc.array(unit, { minLength, maxLength }).map((units) => units.join(''));
}

/** A short string that may hold anything above. */
export const trickyString: fc.Arbitrary<string> = textOf(textUnit, 8);

/** A string with no lone surrogate (every unit above but the lone halves). */
export const wellFormedString: fc.Arbitrary<string> = textOf(
  fc.oneof(
    { arbitrary: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'.split('')), weight: 3 },
    { arbitrary: trickyUnit.filter((u) => ![LONE_HIGH, LONE_LOW, '\udbff', '\udfff'].includes(u)), weight: 2 },
  ),
  8,
);

/** Object keys, including ones that are special to JavaScript objects or sort unusually. */
export const trickyKey: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom('a', 'b', 'A', 'aa', '', '1', '10', '2', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'é', '\ue000', '\u{10000}', '\u{1f600}'), weight: 3 },
  { arbitrary: trickyString, weight: 2 },
);

const HEX = '0123456789abcdef';
export const hexDigit: fc.Arbitrary<string> = fc.constantFrom(...HEX.split(''));
export function hexString(length: number): fc.Arbitrary<string> {
  return textOf(hexDigit, length, length);
}

/** Replaces the code unit at `index` (clamped into the string) with `replacement`. */
export function replaceAt(text: string, index: number, replacement: string): string {
  if (text.length === 0) return replacement;
  const at = index % text.length;
  return text.slice(0, at) + replacement + text.slice(at + 1);
}

/** Inserts `insertion` before the code unit at `index` (clamped, may append). */
export function insertAt(text: string, index: number, insertion: string): string {
  const at = index % (text.length + 1);
  return text.slice(0, at) + insertion + text.slice(at);
}

/** Digits that are not ASCII: Arabic-Indic, Devanagari, fullwidth, mathematical bold (astral). */
export const NON_ASCII_DIGITS = ['\u0660', '\u0669', '\u0966', '\uff10', '\uff19', '\u{1d7ce}'] as const;

/** True when `text` holds no lone surrogate (String.prototype.isWellFormed, which ES2022 typings lack). */
export function isWellFormedText(text: string): boolean {
  return /^(?:[\ud800-\udbff][\udc00-\udfff]|[^\ud800-\udfff])*$/.test(text);
}

/** `value` now and then (one case in `every`), else undefined. */
export function sometimes<T>(value: fc.Arbitrary<T>, every: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: value, weight: 1 }, { arbitrary: fc.constant(undefined), weight: every - 1 });
}
