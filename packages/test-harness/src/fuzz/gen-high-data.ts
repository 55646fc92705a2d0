import fc from 'fast-check';
import { MAX_HIGH_DATA_BYTES, MAX_HIGH_DATA_DEPTH, MAX_JSON_DEPTH } from '@oduflow/protocol';
import { type FuzzCase, fuzzCase } from './fuzz-case.js';
import { domainValue, nested, plan } from './gen-json.js';
import { LONE_HIGH, wellFormedString } from './gen-text.js';
import { misSerialize } from './mis-serialize.js';

/*
 * Custom high data texts (`state_data_json`, DESIGN §3): valid state ids →
 * bodies in both declaration forms, then the ways one goes wrong: reserved
 * keys at any level and their near misses, a state module declared twice,
 * broken structure, nesting at the 32 limit (and at the 100 one), sizes at
 * 64 KiB counted in UTF-8 bytes, and texts that are not canonical.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Body = Record<string, Json[]>;
type High = Record<string, Body>;

const MODULES = ['pkg', 'file', 'service', 'cmd', 'user', 'test', 'mount', 'a'] as const;
const FUNCTIONS = ['installed', 'managed', 'running', 'run', 'present', 'nop', 'succeed_without_changes'] as const;
const ARG_KEYS = ['name', 'source', 'mode', 'user', 'require', 'watch', 'onlyif', 'order', 'names', 'contents', '_parallel', 'Parallel'] as const;

const FORBIDDEN_KEYS = ['__env__', '__sls__', '__pub_jid', '__pub_fun', '__id__', '__', '___', '__proto__', 'parallel'] as const;
/** Keys that look reserved and are not: they must pass. */
const NEAR_FORBIDDEN_KEYS = ['_env_', '_parallel', 'Parallel', 'PARALLEL', 'parallel ', ' parallel', 'parallels', 'x__', '_', '_x_', 'env__', '\uff3f\uff3fenv'] as const;

const stateId = fc.oneof(fc.constantFrom('nginx', 'motd', '/etc/motd', 'a b', 'é', '1', 'Z'), wellFormedString.filter((s) => s.length > 0));
const argObject: fc.Arbitrary<Json> = fc.dictionary(fc.constantFrom(...ARG_KEYS), domainValue as fc.Arbitrary<Json>, { maxKeys: 3, noNullPrototype: true });

/** One declaration: `{module: [function, args...]}` or `{"module.function": [args...]}`. */
const declaration: fc.Arbitrary<readonly [string, Json[]]> = fc
  .tuple(fc.constantFrom(...MODULES), fc.constantFrom(...FUNCTIONS), fc.array(argObject, { maxLength: 2 }), fc.boolean(), fc.nat(3))
  .map(([module, fn, args, dotted, at]) => {
    if (dotted) return [`${module}.${fn}`, args] as const;
    const list: Json[] = [...args];
    list.splice(at % (list.length + 1), 0, fn);
    return [module, list] as const;
  });

/** A body with one or two declarations of different modules. */
const body: fc.Arbitrary<Body> = fc.uniqueArray(declaration, { minLength: 1, maxLength: 2, selector: ([key]) => key.split('.')[0] }).map((entries) => Object.fromEntries(entries));

const validHighData: fc.Arbitrary<High> = fc.dictionary(stateId, body, { minKeys: 1, maxKeys: 4, noNullPrototype: true });

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Every object in `value` with its nesting level (0: the high data itself, 1: a body, 2+: arguments). */
function objectsOf(value: Json, level = 0, found: Array<[Record<string, Json>, number]> = []): Array<[Record<string, Json>, number]> {
  if (Array.isArray(value)) value.forEach((item) => objectsOf(item, level + 1, found));
  else if (typeof value === 'object' && value !== null) {
    found.push([value, level]);
    Object.values(value).forEach((child) => objectsOf(child, level + 1, found));
  }
  return found;
}

/** A value that keeps the structure valid at an object of that level. */
function validChildAt(level: number): Json {
  if (level === 0) return { 'test.nop': [] };
  if (level === 1) return [];
  return 'x';
}

function withKey(high: High, key: string, pick: number): High {
  const copy = clone(high);
  const objects = objectsOf(copy);
  const [target, level] = objects[pick % objects.length] as [Record<string, Json>, number];
  target[key] = validChildAt(level);
  return copy;
}

function withSecondModule(high: High, pick: number, variant: number): High {
  const copy = clone(high);
  const bodies = Object.values(copy);
  const target = bodies[pick % bodies.length] as Body;
  const module = (Object.keys(target)[0] as string).split('.')[0] as string;
  const variants = [module, `${module}.other`, `${module}.`, `${module}.a.b`, `${module}s.other`, `.${module}`, `${module.toUpperCase()}.x`, `${module}_.x`];
  target[variants[variant % variants.length] as string] = [];
  return copy;
}

const BROKEN_STRUCTURES: ReadonlyArray<readonly [string, Json]> = [
  ['an empty object', {}],
  ['a list', [{ a: { 'test.nop': [] } }]],
  ['a string', 'x'],
  ['a number', 1],
  ['null', null],
  ['an empty body', { a: {} }],
  ['a body that is a list', { a: ['test.nop'] }],
  ['a body that is a string', { a: 'test.nop' }],
  ['an entry that is not a list', { a: { pkg: 'installed' } }],
  ['an entry that is an object', { a: { pkg: { name: 'x' } } }],
  ['an entry that is null', { a: { 'test.nop': null } }],
];

/** `high` with one more state whose argument nests `containers` deep (total text depth: containers + 4). */
function deepened(high: High, containers: Json): High {
  return { ...clone(high), '~deep': { 'test.nop': [{ name: containers }] } };
}

const PAD_STATE = '~pad';
/** Units of a padding string as they appear in the text, with their UTF-8 size; the last is a raw lone surrogate. */
const PAD_UNITS = [
  ['a', 1],
  ['é', 2],
  ['中', 3],
  ['\u{1f600}', 4],
  ['\\n', 2],
  ['\\u0001', 6],
  [LONE_HIGH, 3],
] as const;

/** The canonical text of `high` plus a padding state, padded to exactly `bytes` UTF-8 bytes (when it fits). */
function paddedText(high: High, bytes: number, unitIndex: number): string {
  const base = misSerialize({ ...clone(high), [PAD_STATE]: { 'test.nop': [{ name: '' }] } }, { deviation: 'none', node: 0, detail: 0 });
  const marker = `"${PAD_STATE}":{"test.nop":[{"name":"`;
  const at = base.indexOf(marker) + marker.length;
  const need = bytes - Buffer.byteLength(base, 'utf8');
  const [unit, size] = PAD_UNITS[unitIndex % PAD_UNITS.length] as (typeof PAD_UNITS)[number];
  const count = Math.max(0, Math.floor(need / size));
  const pad = unit.repeat(count) + 'a'.repeat(Math.max(0, need - count * size));
  return base.slice(0, at) + pad + base.slice(at);
}

const canonicalPlan = { deviation: 'none', node: 0, detail: 0 } as const;

function textCase(value: unknown, label: string): FuzzCase {
  return fuzzCase('high_data', { state_data_json: misSerialize(value, canonicalPlan) }, label);
}

export const highDataCase: fc.Arbitrary<FuzzCase> = fc.oneof(
  { arbitrary: validHighData.map((h) => textCase(h, 'valid custom high data')), weight: 4 },
  {
    arbitrary: fc.tuple(validHighData, fc.constantFrom(...FORBIDDEN_KEYS, ...NEAR_FORBIDDEN_KEYS), fc.nat(32)).map(([h, key, pick]) =>
      textCase(withKey(h, key, pick), `high data with the key ${JSON.stringify(key)} at some level`),
    ),
    weight: 4,
  },
  {
    arbitrary: fc.tuple(validHighData, fc.nat(8), fc.nat(16)).map(([h, pick, variant]) => textCase(withSecondModule(h, pick, variant), 'high data with a second declaration of a similar state module')),
    weight: 3,
  },
  { arbitrary: fc.constantFrom(...BROKEN_STRUCTURES).map(([name, value]) => textCase(value, `high data that is ${name}`)), weight: 1 },
  {
    arbitrary: fc
      .tuple(validHighData, fc.oneof(fc.integer({ min: MAX_HIGH_DATA_DEPTH - 2, max: MAX_HIGH_DATA_DEPTH + 2 }), fc.integer({ min: MAX_JSON_DEPTH - 1, max: MAX_JSON_DEPTH + 2 })))
      .chain(([h, depth]) => nested(fc.constant(depth - 4), fc.constant(null)).map((deep) => textCase(deepened(h, deep as Json), `high data nested about ${depth} deep`))),
    weight: 2,
  },
  {
    arbitrary: fc.tuple(validHighData, fc.integer({ min: -4, max: 4 }), fc.nat(PAD_UNITS.length - 1)).map(([h, delta, unit]) =>
      fuzzCase('high_data', { state_data_json: paddedText(h, MAX_HIGH_DATA_BYTES + delta, unit) }, `high data of ${MAX_HIGH_DATA_BYTES + delta} UTF-8 bytes`),
    ),
    weight: 1,
  },
  {
    // Over two limits at once: the first check in the order of docs/protocol-rules.md must name the code.
    arbitrary: fc
      .tuple(validHighData, fc.integer({ min: MAX_HIGH_DATA_DEPTH - 1, max: MAX_HIGH_DATA_DEPTH + 1 }), fc.constantFrom(...FORBIDDEN_KEYS, 'name'), fc.integer({ min: -1, max: 1 }), fc.nat(PAD_UNITS.length - 1))
      .chain(([h, depth, key, delta, unit]) =>
        nested(fc.constant(depth - 4), fc.constant(null)).map((deep) =>
          fuzzCase('high_data', { state_data_json: paddedText(withKey(deepened(h, deep as Json), key, 1), MAX_HIGH_DATA_BYTES + delta, unit) }, `high data near both the size and the depth limit, with the key ${JSON.stringify(key)}`),
        ),
      ),
    weight: 1,
  },
  {
    arbitrary: fc.tuple(validHighData, plan).map(([h, p]) => fuzzCase('high_data', { state_data_json: misSerialize(h, p) }, `high data text with deviation ${p.deviation}`)),
    weight: 3,
  },
  {
    arbitrary: fc.tuple(validHighData, fc.constantFrom(...FORBIDDEN_KEYS), fc.nat(32), plan).map(([h, key, pick, p]) =>
      fuzzCase('high_data', { state_data_json: misSerialize(withKey(h, key, pick), p) }, `non-canonical high data text with the key ${JSON.stringify(key)}`),
    ),
    weight: 1,
  },
);
