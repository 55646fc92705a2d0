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
  return inDomain(value, new Set(), 0);
}

function inDomain(value: unknown, ancestors: Set<object>, depth: number): boolean {
  switch (typeof value) {
    case 'boolean':
      return true;
    case 'string':
      return isWellFormedString(value);
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
          ? arrayInDomain(value, ancestors, depth + 1)
          : objectInDomain(value, ancestors, depth + 1);
      } finally {
        ancestors.delete(value);
      }
    default:
      // undefined, bigint, symbol, function
      return false;
  }
}

function arrayInDomain(array: unknown[], ancestors: Set<object>, depth: number): boolean {
  if (Object.getPrototypeOf(array) !== Array.prototype) return false;
  for (let index = 0; index < array.length; index += 1) {
    if (!(index in array)) return false; // a hole serializes as `null`
    if (!inDomain(array[index], ancestors, depth)) return false;
  }
  return true;
}

function objectInDomain(object: object, ancestors: Set<object>, depth: number): boolean {
  // Date, Map, class instances, boxed primitives... are not JSON objects.
  if (!isPlainObject(object)) return false;
  if (Object.getOwnPropertySymbols(object).length > 0) return false;
  const keys = Object.keys(object);
  if (Object.getOwnPropertyNames(object).length !== keys.length) return false;
  return keys.every((key) => isWellFormedString(key) && inDomain(object[key], ancestors, depth));
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
 */

/** The canonical serialization of `value`; throws `unsupported_json_value` for a value outside the domain. */
export function canonicalJson(value: unknown): string {
  try {
    if (isCanonicalJsonValue(value)) return stableStringify(value);
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
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ProtocolError('non_canonical_json', 'text is not valid JSON');
  }
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
