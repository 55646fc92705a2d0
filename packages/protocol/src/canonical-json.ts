import stableStringify from 'fast-json-stable-stringify';
import { MAX_JSON_DEPTH } from './constants.js';
import { ProtocolError } from './errors.js';
import { textNestingDepth } from './text-depth.js';

/**
 * A value in the canonical JSON domain that TypeScript and Python serialize
 * byte-for-byte identically: plain objects with string keys, arrays, strings
 * without lone surrogates, booleans, null and integers with |n| ≤ 2^53−1.
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A code unit of a surrogate pair that is missing its other half (matched per UTF-16 code unit: no `u` flag). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function isWellFormedString(value: string): boolean {
  return !LONE_SURROGATE.test(value);
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * True when `value` lies in the domain. Cycles, holes, symbol keys and
 * non-enumerable properties are outside it: the serializer would silently drop
 * or mangle them, and Python has no equivalent. So is nesting deeper than
 * `MAX_JSON_DEPTH` (the top-level container is depth 1); the walk stops there,
 * so its recursion is bounded whatever the value.
 */
export function isCanonicalJsonValue(value: unknown): value is JsonValue {
  return inDomain(value, new Set(), 0, { sorted: true, strings: true });
}

interface DomainWalk {
  /** Whether every object seen so far enumerates its keys in strictly ascending UTF-16 order. */
  sorted: boolean;
  /** Whether strings and keys are checked for lone surrogates (canonicalJson checks its output instead). */
  strings: boolean;
}

function inDomain(value: unknown, ancestors: Set<object>, depth: number, walk: DomainWalk): boolean {
  switch (typeof value) {
    case 'boolean':
      return true;
    case 'string':
      return !walk.strings || isWellFormedString(value);
    case 'number':
      // -0 would serialize as `0` and come back as a different value.
      return Number.isSafeInteger(value) && !Object.is(value, -0);
    case 'object':
      if (value === null) return true;
      if (depth >= MAX_JSON_DEPTH) return false;
      if (ancestors.has(value)) return false;
      ancestors.add(value);
      try {
        return Array.isArray(value)
          ? arrayInDomain(value, ancestors, depth + 1, walk)
          : objectInDomain(value, ancestors, depth + 1, walk);
      } finally {
        ancestors.delete(value);
      }
    default:
      // undefined, bigint, symbol, function
      return false;
  }
}

function arrayInDomain(array: unknown[], ancestors: Set<object>, depth: number, walk: DomainWalk): boolean {
  if (Object.getPrototypeOf(array) !== Array.prototype) return false;
  for (let index = 0; index < array.length; index += 1) {
    if (!(index in array)) return false; // a hole serializes as `null`
    if (!inDomain(array[index], ancestors, depth, walk)) return false;
  }
  return true;
}

function objectInDomain(object: object, ancestors: Set<object>, depth: number, walk: DomainWalk): boolean {
  // Date, Map, class instances, boxed primitives... are not JSON objects.
  if (!isPlainObject(object)) return false;
  if (Object.getOwnPropertySymbols(object).length > 0) return false;
  const keys = Object.keys(object);
  if (Object.getOwnPropertyNames(object).length !== keys.length) return false;
  for (let index = 0; index < keys.length; index += 1) {
    const key = keys[index] as string;
    if (walk.sorted && index > 0 && !((keys[index - 1] as string) < key)) walk.sorted = false;
    if ((walk.strings && !isWellFormedString(key)) || !inDomain(object[key], ancestors, depth, walk)) return false;
  }
  return true;
}

/*
 * Why fast-json-stable-stringify gives exactly the canonical bytes on this
 * domain (checked against its 2.1.0 source, and by the fixtures):
 * - keys: `Object.keys(node).sort()` with no comparator, i.e. by UTF-16 code
 *   units. The default sort also undoes V8's integer-like-keys-first order
 *   ("1", "10", "2"), so no fix-up is needed.
 * - strings and keys: `JSON.stringify`, which escapes only `"`, `\` and
 *   U+0000–U+001F (`\b \f \n \r \t`, else lowercase `\u00xx`) and writes
 *   U+2028, U+2029 and DEL raw — the same as Python's
 *   `json.dumps(ensure_ascii=False)`. Its one other escape, of lone
 *   surrogates, cannot occur: they are outside the domain.
 * - numbers: `'' + n`, plain decimal digits for every safe integer (exponent
 *   notation starts at 1e21); -0, which would print as `0`, is outside the domain.
 * - `toJSON` is honoured and `undefined` members are dropped, but the domain
 *   check admits neither functions nor undefined, so neither can happen.
 *
 * A value whose every object already enumerates its keys in that order (one
 * parsed from canonical text, a record read back) needs no sorting:
 * `JSON.stringify` then writes the same bytes in one native call, so the
 * domain walk notes whether that holds and the serializer is chosen after it.
 * Both serializers write a lone surrogate as `\ud…`, and nothing else
 * writes `\ud` but an escaped backslash before "ud": so the walk leaves
 * strings alone, and only an output holding `\ud` is walked again with them.
 */

/** The canonical serialization of `value`; throws `unsupported_json_value` for a value outside the domain. */
export function canonicalJson(value: unknown): string {
  try {
    const walk = { sorted: true, strings: false };
    if (inDomain(value, new Set(), 0, walk)) {
      const text = walk.sorted ? JSON.stringify(value) : stableStringify(value);
      if (!text.includes('\\ud') || isCanonicalJsonValue(value)) return text;
    }
  } catch (error) {
    // The depth bound keeps both walks shallow; only a throwing getter or a
    // hostile proxy can get here.
    throw new ProtocolError('unsupported_json_value', 'value could not be read as canonical JSON', { cause: error });
  }
  throw new ProtocolError(
    'unsupported_json_value',
    `value is outside the canonical JSON domain (objects, arrays, well-formed strings, booleans, null, safe integers; nesting at most ${MAX_JSON_DEPTH} levels)`,
  );
}

/**
 * Parses `text` and returns its value only if `text` is byte-equal to the
 * canonical serialization of that value. That one comparison rejects
 * whitespace, key order, needless escapes, duplicate keys and number spellings
 * (`1.0`, `1e2`, `-0`) alike, whichever way the language parsed them.
 * Every failure is `non_canonical_json`.
 */
export function parseCanonicalJson(text: unknown): JsonValue {
  if (typeof text !== 'string') {
    throw new ProtocolError('non_canonical_json', 'canonical JSON text must be a string');
  }
  if (textNestingDepth(text) > MAX_JSON_DEPTH) {
    // Scanned on the text, before parsing, like high data: the same texts fail in both languages.
    throw new ProtocolError('non_canonical_json', `text nests deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return parseShallowCanonicalJson(text);
}

/**
 * `parseCanonicalJson` after its depth check: `text` nests at most
 * `MAX_JSON_DEPTH` levels (stateDigest has checked a tighter bound already).
 */
export function parseShallowCanonicalJson(text: string): JsonValue {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ProtocolError('non_canonical_json', 'text is not valid JSON');
  }
  if (isPlainlyCanonical(parsed, text)) return parsed as JsonValue;
  // Not proved canonical by the quick test: decide exactly.
  let canonical: string;
  try {
    canonical = canonicalJson(parsed);
  } catch {
    throw new ProtocolError('non_canonical_json', 'text holds a value outside the canonical JSON domain');
  }
  // Equal UTF-16 strings of well-formed text are equal UTF-8 bytes.
  if (canonical !== text) {
    throw new ProtocolError('non_canonical_json', 'text is not in canonical form (key order, whitespace, escapes or number spelling)');
  }
  return parsed as JsonValue;
}

/**
 * A sufficient test that `text` is the canonical serialization of `parsed`,
 * its `JSON.parse`: every number a safe integer, every object's keys in
 * strictly ascending UTF-16 order as enumerated, no `\ud` in the text, and
 * `JSON.stringify(parsed)` equal to `text`. Then the domain holds (a lone
 * surrogate would make `JSON.stringify` write `\ud…`) and the canonical
 * serializer, which sorts keys the same way and writes strings and numbers
 * with the same `JSON.stringify`, gives `text` too. A false answer proves
 * nothing (integer-like keys, "10" before "2", enumerate out of text order):
 * the caller then decides exactly.
 */
function isPlainlyCanonical(parsed: unknown, text: string): boolean {
  return hasSortedKeysAndSafeIntegers(parsed) && !text.includes('\\ud') && JSON.stringify(parsed) === text;
}

/** Walks a `JSON.parse` result, whose nesting the caller has bounded. */
function hasSortedKeysAndSafeIntegers(value: unknown): boolean {
  if (typeof value === 'number') return Number.isSafeInteger(value) && !Object.is(value, -0);
  if (typeof value !== 'object' || value === null) return true;
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) if (!hasSortedKeysAndSafeIntegers(item)) return false;
    return true;
  }
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object);
  for (let index = 0; index < keys.length; index += 1) {
    const key = keys[index] as string;
    if (index > 0 && !((keys[index - 1] as string) < key)) return false;
    if (!hasSortedKeysAndSafeIntegers(object[key])) return false;
  }
  return true;
}
