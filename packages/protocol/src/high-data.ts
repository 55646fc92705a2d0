import { createHash } from 'node:crypto';
import { type JsonValue, canonicalJson, parseShallowCanonicalJson } from './canonical-json.js';
import { MAX_HIGH_DATA_BYTES, MAX_HIGH_DATA_DEPTH } from './constants.js';
import { ProtocolError } from './errors.js';
import { textNestingDepth } from './text-depth.js';

/** One Salt state body: `{ "<module>": ["<function>", {arg}, ...] }` or `{ "<module>.<function>": [{arg}, ...] }`. */
export type StateBody = { [moduleOrFunction: string]: JsonValue[] };
/** Custom high data: state ids → state bodies. */
export type HighData = { [stateId: string]: StateBody };

/**
 * The SHA-256 digest that binds a `custom` request to its high data, computed
 * from `state_data_json` as received, after the checks of
 * docs/protocol-rules.md in their order (the first failing check names the code):
 * type, size, depth on the raw text, canonical form, forbidden keys, structure.
 */
export function stateDigest(stateDataJson: unknown): string {
  if (typeof stateDataJson !== 'string') {
    throw new ProtocolError('invalid_high_data', 'state data must be a JSON text');
  }
  assertSizeWithinLimit(textByteLength(stateDataJson));
  assertDepthWithinLimit(textNestingDepth(stateDataJson));
  // MAX_HIGH_DATA_DEPTH < MAX_JSON_DEPTH: parseCanonicalJson's own depth scan would find nothing more.
  const value = parseShallowCanonicalJson(stateDataJson);
  // In canonical text a key is written raw between quotes (`_` is never escaped), so a
  // text without `"__` or `"parallel"` holds no forbidden key: only one with either is walked.
  if (stateDataJson.includes('"__') || stateDataJson.includes('"parallel"')) assertNoForbiddenKeys(value);
  assertHighDataShape(value);
  return createHash('sha256').update(stateDataJson, 'utf8').digest('hex');
}

/**
 * Checks caller-supplied high data before the master serializes it. The depth
 * is checked first so that a hostile, deeply nested value never reaches the
 * recursive serializer; then the domain, the canonical size, forbidden keys
 * and structure, as for `stateDigest`.
 */
export function validateHighData(value: unknown): HighData {
  assertDepthWithinLimit(valueNestingDepth(value, MAX_HIGH_DATA_DEPTH));
  const text = canonicalJson(value);
  assertSizeWithinLimit(utf8ByteLength(text));
  const json = value as JsonValue;
  assertNoForbiddenKeys(json);
  assertHighDataShape(json);
  return json;
}

function assertSizeWithinLimit(bytes: number): void {
  if (bytes > MAX_HIGH_DATA_BYTES) {
    throw new ProtocolError('high_data_too_large', `high data exceeds ${MAX_HIGH_DATA_BYTES} bytes of canonical JSON`);
  }
}

function assertDepthWithinLimit(depth: number): void {
  if (depth > MAX_HIGH_DATA_DEPTH) {
    throw new ProtocolError('high_data_too_deep', `high data nests deeper than ${MAX_HIGH_DATA_DEPTH} levels`);
  }
}

/**
 * The UTF-8 length of a text, counted only as far as the limit needs: a UTF-16
 * unit is 1 to 3 bytes (a pair of them 4), so a text of more units than the
 * limit is over it, and one of at most a third of the limit is within it.
 */
function textByteLength(text: string): number {
  if (text.length > MAX_HIGH_DATA_BYTES) return text.length;
  if (text.length * 3 <= MAX_HIGH_DATA_BYTES) return text.length;
  return utf8ByteLength(text);
}

/** UTF-8 length as Python's `encode("utf-8", "surrogatepass")` counts it: a lone surrogate is 3 bytes. */
function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && isLowSurrogate(text.charCodeAt(index + 1))) {
      bytes += 4;
      index += 1;
    } else bytes += 3;
  }
  return bytes;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/**
 * Nesting depth of a value (a scalar is 0, the top-level container 1),
 * walked level by level and abandoned once past `limit`, so that cycles end,
 * shared sub-objects are visited once per level and nothing recurses.
 */
function valueNestingDepth(value: unknown, limit: number): number {
  let level = new Set<object>();
  if (typeof value === 'object' && value !== null) level.add(value);
  let depth = 0;
  while (level.size > 0 && depth <= limit) {
    depth += 1;
    const next = new Set<object>();
    for (const container of level) {
      for (const child of Object.values(container) as unknown[]) {
        if (typeof child === 'object' && child !== null) next.add(child);
      }
    }
    level = next;
  }
  return depth;
}

function isForbiddenKey(key: string): boolean {
  // `__env__`, `__sls__`, `__pub_*` would be injected into Salt's own
  // bookkeeping; `parallel` would fork the state out of the wrapper's control.
  return key.startsWith('__') || key === 'parallel';
}

function assertNoForbiddenKeys(value: JsonValue): void {
  const pending: JsonValue[] = [value];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (Array.isArray(next)) pending.push(...next);
    else if (typeof next === 'object' && next !== null) {
      for (const [key, child] of Object.entries(next)) {
        if (isForbiddenKey(key)) {
          throw new ProtocolError('forbidden_key', 'high data uses a reserved key (one starting with "__", or "parallel")');
        }
        pending.push(child);
      }
    }
  }
}

function isJsonObject(value: JsonValue): value is { [key: string]: JsonValue } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function assertHighDataShape(value: JsonValue): asserts value is HighData {
  if (!isJsonObject(value) || Object.keys(value).length === 0) {
    throw new ProtocolError('invalid_high_data', 'high data must be a non-empty object of state ids');
  }
  for (const body of Object.values(value)) {
    if (!isJsonObject(body)) {
      throw new ProtocolError('invalid_high_data', 'each state must be a non-empty object');
    }
    const keys = Object.keys(body);
    if (keys.length === 0) {
      throw new ProtocolError('invalid_high_data', 'each state must be a non-empty object');
    }
    for (const key of keys) {
      if (!Array.isArray(body[key])) {
        throw new ProtocolError('invalid_high_data', 'each state entry must map to a list of function arguments');
      }
    }
    // One declaration (the usual state) cannot repeat a module.
    if (keys.length > 1 && new Set(keys.map(stateModule)).size !== keys.length) {
      throw new ProtocolError('invalid_high_data', 'a state declares the same state module twice');
    }
  }
}

/**
 * The state module a state-body key names: the text before its first `.`
 * (Salt's SLS compiler splits `<module>.<function>` keys on `.` and refuses a
 * second declaration of the same module in one state).
 */
function stateModule(key: string): string {
  const dot = key.indexOf('.');
  return dot === -1 ? key : key.slice(0, dot);
}
