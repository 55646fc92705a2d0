import fc from 'fast-check';
import { type FuzzCase, fuzzCase } from './fuzz-case.js';
import { NON_ASCII_DIGITS, hexDigit, hexString, insertAt, replaceAt, trickyString } from './gen-text.js';

/*
 * Identities (DESIGN §3) and their near misses: the canonical forms, and the
 * one-character mistakes a regex engine or a careless port would let through
 * (uppercase, the version and variant nibbles, a trailing newline, digits
 * and hyphens that are not ASCII, look-alike letters, nil and max).
 */

/** A canonical RFC 9562 UUID: lowercase, version 1-8, variant 10xx. */
export const canonicalUuid: fc.Arbitrary<string> = fc
  .tuple(hexString(8), hexString(4), fc.constantFrom(...'12345678'.split('')), hexString(3), fc.constantFrom(...'89ab'.split('')), hexString(3), hexString(12))
  .map(([a, b, version, c, variant, d, e]) => `${a}-${b}-${version}${c}-${variant}${d}-${e}`);

export const canonicalMinionId: fc.Arbitrary<string> = canonicalUuid.map((uuid) => `client-${uuid}`);

export const canonicalJid: fc.Arbitrary<string> = fc.array(fc.constantFrom(...'0123456789'.split('')), { minLength: 20, maxLength: 20 }).map((d) => d.join(''));

const VERSION_AT = 14;
const VARIANT_AT = 19;

type Mutation = (text: string, index: number) => string;

/** The positions of the characters of `text` that `pattern` matches. */
function positionsOf(text: string, pattern: RegExp): number[] {
  return text.split('').flatMap((char, position) => (pattern.test(char) ? [position] : []));
}

/** Replaces one of the characters `pattern` matches (the index picks which) by `change(char)`; appends when there is none. */
function changeOne(pattern: RegExp, change: (char: string) => string): Mutation {
  return (text, index) => {
    const positions = positionsOf(text, pattern);
    const at = positions[index % Math.max(positions.length, 1)];
    return at === undefined ? text + change('0') : replaceAt(text, at, change(text[at] as string));
  };
}

/** The nibble `offset` characters into the trailing UUID of `text`. */
function nibble(offset: number, value: string): Mutation {
  return (text) => (text.length < 36 ? text + value : replaceAt(text, text.length - 36 + offset, value));
}

/** One-character (or one-edge) changes of a valid identity string, each named for the fixture description. */
const MUTATIONS: ReadonlyArray<readonly [string, fc.Arbitrary<Mutation>]> = [
  ['uppercase hex letter', fc.constant(changeOne(/[a-f]/, (c) => c.toUpperCase()))],
  ['all uppercase', fc.constant((t: string) => t.toUpperCase())],
  ['wrong version nibble', fc.constantFrom(...'09abcdef'.split('')).map((v) => nibble(VERSION_AT, v))],
  ['wrong variant nibble', fc.constantFrom(...'01234567cdef'.split('')).map((v) => nibble(VARIANT_AT, v))],
  ['trailing newline', fc.constantFrom('\n', '\r\n', '\r', '\u2028').map((nl) => (t: string) => t + nl)],
  ['leading space', fc.constantFrom(' ', '\t', '\u00a0', '\u0000').map((s) => (t: string) => s + t)],
  ['trailing space', fc.constantFrom(' ', '\t', '\u00a0', '\u0000').map((s) => (t: string) => t + s)],
  ['non-ASCII digit', fc.constantFrom(...NON_ASCII_DIGITS).map((d) => changeOne(/[0-9]/, () => d))],
  ['non-ASCII hyphen', fc.constantFrom('\u2010', '\u2011', '\u2212', '\uff0d').map((h) => (t: string) => t.replace('-', h))],
  ['look-alike letter', fc.constantFrom('\u0430', '\u0441', '\u0435', '\uff41').map((l) => changeOne(/[a-f]/, () => l))],
  ['one character dropped', fc.constant((t: string, i: number) => (t.length === 0 ? t : t.slice(0, i % t.length) + t.slice((i % t.length) + 1)))],
  ['one hex digit added', hexDigit.map((h) => (t: string, i: number) => insertAt(t, i, h))],
  ['hyphens removed', fc.constant((t: string) => t.replaceAll('-', ''))],
  ['braces, quotes or a urn prefix', fc.constantFrom((t: string) => `{${t}}`, (t: string) => `urn:uuid:${t}`, (t: string) => `"${t}"`)],
];

const mutation = fc.oneof(...MUTATIONS.map(([name, arb]) => arb.map((apply) => ({ name, apply }))));

export function nearMiss(valid: fc.Arbitrary<string>): fc.Arbitrary<{ value: string; label: string }> {
  return fc.tuple(valid, mutation, fc.nat(64)).map(([value, m, index]) => ({ value: m.apply(value, index), label: m.name }));
}

const SPECIAL_UUIDS = [
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF',
  '00000000-0000-1000-8000-000000000000',
  'ffffffff-ffff-8fff-bfff-ffffffffffff',
  '00000000-0000-9000-8000-000000000000',
];

/** Values that are not strings, or strings of the wrong kind. */
function otherValues(valid: fc.Arbitrary<string>): fc.Arbitrary<unknown> {
  return fc.oneof(
    // eslint-disable-next-line no-loss-of-precision -- a JID as a JSON number: the lost digits are part of the case
    fc.constantFrom(null, true, false, 0, 1, -1, 20261129082300245264, 1.5, '', ' ', '\n'),
    valid.map((v) => [v]),
    valid.map((v) => ({ value: v })),
    valid.map((v) => (/^[0-9]+$/.test(v) ? Number(v) : v.length)),
    trickyString,
  );
}

const KINDS = {
  request_id: { valid: canonicalUuid, extra: fc.constantFrom(...SPECIAL_UUIDS) },
  minion_id: {
    valid: canonicalMinionId,
    extra: fc.oneof(
      canonicalUuid,
      fc.constantFrom('Client-', 'CLIENT-', 'client_', 'client', 'client--', 'minion-', ' client-', 'client-\n').chain((prefix) => canonicalUuid.map((u) => prefix + u)),
      fc.constantFrom(...SPECIAL_UUIDS).map((u) => `client-${u}`),
    ),
  },
  jid: {
    valid: canonicalJid,
    extra: fc.oneof(
      fc.integer({ min: 0, max: 40 }).chain((n) => fc.array(fc.constantFrom(...'0123456789'.split('')), { minLength: n, maxLength: n }).map((d) => d.join(''))),
      canonicalJid.map((j) => `+${j.slice(1)}`),
      canonicalJid.map((j) => `-${j.slice(1)}`),
      canonicalJid.map((j) => `${j.slice(0, 19)}.`),
      canonicalJid.map((j) => `${j.slice(0, 10)} ${j.slice(11)}`),
      canonicalJid.map((j) => `0x${j.slice(2)}`),
    ),
  },
} as const;

type IdentityKind = keyof typeof KINDS;

function identityOf(kind: IdentityKind): fc.Arbitrary<FuzzCase> {
  const { valid, extra } = KINDS[kind];
  return fc.oneof(
    { arbitrary: valid.map((value) => fuzzCase('identity', { kind, value }, `a canonical ${kind}`)), weight: 3 },
    { arbitrary: nearMiss(valid).map(({ value, label }) => fuzzCase('identity', { kind, value }, `${kind} near miss: ${label}`)), weight: 6 },
    { arbitrary: extra.map((value) => fuzzCase('identity', { kind, value }, `${kind} edge form`)), weight: 2 },
    { arbitrary: otherValues(valid).map((value) => fuzzCase('identity', { kind, value }, `${kind} given a value of another type or kind`)), weight: 1 },
  );
}

/** Identity cases: every kind, about a third of them valid. */
export const identityCase: fc.Arbitrary<FuzzCase> = fc.oneof(identityOf('request_id'), identityOf('minion_id'), identityOf('jid'));
