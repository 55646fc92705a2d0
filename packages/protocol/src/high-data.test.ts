import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.js';
import { stateDigest, validateHighData } from './high-data.js';
import { codeOf } from '../tests/support.js';


const NGINX = { nginx: { 'pkg.installed': [{ name: 'nginx' }] } };

/** Nested arrays inside one state so the whole text is `depth` levels deep. */
function nestedTo(depth: number): string {
  const extra = depth - 3;
  return `{"s":{"m":[${'['.repeat(extra)}${']'.repeat(extra)}]}}`;
}

/** A valid text of exactly `bytes` UTF-8 bytes. */
function sizedTo(bytes: number): string {
  const frame = '{"s":{"m":[""]}}';
  return `{"s":{"m":["${'a'.repeat(bytes - frame.length)}"]}}`;
}

describe('stateDigest', () => {
  it('returns the lowercase hex SHA-256 of the canonical text', () => {
    const text = canonicalJson(NGINX);
    expect(stateDigest(text)).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
    expect(stateDigest(text)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('accepts exactly 65536 bytes and refuses 65537', () => {
    expect(stateDigest(sizedTo(65536))).toMatch(/^[0-9a-f]{64}$/);
    expect(codeOf(() => stateDigest(sizedTo(65537)))).toBe('high_data_too_large');
  });

  it('counts UTF-8 bytes, not UTF-16 code units', () => {
    const text = sizedTo(65537 - 200).replace('"a', `"${'😀'.repeat(50)}a`);
    expect(text.length).toBeLessThan(65536);
    expect(codeOf(() => stateDigest(text))).toBe('high_data_too_large');
  });

  // Each UTF-8 length class at the exact limit (mutation testing: the emoji case above alone let the class bounds drift).
  it.each([
    ['a two-byte', '\u00e9', 2],
    ['the last two-byte', '\u07ff', 2],
    ['a three-byte', '\u20ac', 3],
    ['the first three-byte', '\u0800', 3],
    ['a four-byte (a surrogate pair)', '\u{1f600}', 4],
    ['the last four-byte', '\u{10ffff}', 4],
    ['the first four-byte', '\u{10000}', 4],
  ])('counts %s character as its UTF-8 bytes at the limit', (_name, char, bytes) => {
    expect(Buffer.byteLength(char, 'utf8')).toBe(bytes);
    const at = (total: number): string => sizedTo(total - 10 * bytes).replace('"a', `"${char.repeat(10)}a`);
    expect(Buffer.byteLength(at(65536), 'utf8')).toBe(65536);
    expect(stateDigest(at(65536))).toMatch(/^[0-9a-f]{64}$/);
    expect(codeOf(() => stateDigest(at(65537)))).toBe('high_data_too_large');
  });

  it('counts a lone surrogate as three bytes, as Python surrogatepass does', () => {
    const at = (total: number): string => sizedTo(total - 3).replace('"a', '"\ud800a');
    // At the limit the size passes and the text fails as non-canonical (a lone surrogate); one more byte is too large.
    expect(codeOf(() => stateDigest(at(65536)))).not.toBe('high_data_too_large');
    expect(codeOf(() => stateDigest(at(65537)))).toBe('high_data_too_large');
    const low = (total: number): string => sizedTo(total - 3).replace('"a', '"\udc00a');
    expect(codeOf(() => stateDigest(low(65536)))).not.toBe('high_data_too_large');
    expect(codeOf(() => stateDigest(low(65537)))).toBe('high_data_too_large');
  });

  it('accepts depth 32 and refuses depth 33, counted on the raw text', () => {
    expect(stateDigest(nestedTo(32))).toMatch(/^[0-9a-f]{64}$/);
    expect(codeOf(() => stateDigest(nestedTo(33)))).toBe('high_data_too_deep');
    expect(codeOf(() => stateDigest('['.repeat(40)))).toBe('high_data_too_deep');
  });

  it('ignores brackets inside strings, including after an escaped quote', () => {
    expect(stateDigest(canonicalJson({ s: { m: [`\\"${'['.repeat(40)}`] } }))).toMatch(/^[0-9a-f]{64}$/);
  });

  it('checks size, then depth, then canonical form, then forbidden keys, then structure', () => {
    expect(codeOf(() => stateDigest(sizedTo(65537).replace('"s"', '"__env__"')))).toBe('high_data_too_large');
    expect(codeOf(() => stateDigest(nestedTo(33).replace(':', ': ')))).toBe('high_data_too_deep');
    expect(codeOf(() => stateDigest('{"__env__": {"m":[]}}'))).toBe('non_canonical_json');
    expect(codeOf(() => stateDigest('[{"parallel":true}]'))).toBe('forbidden_key');
    expect(codeOf(() => stateDigest('[]'))).toBe('invalid_high_data');
  });

  it('refuses reserved keys at any level', () => {
    for (const value of [
      { __env__: { m: [] } },
      { s: { __sls__: [] } },
      { s: { 'cmd.run': [{ __pub_jid: '1' }] } },
      { s: { 'cmd.run': [{ a: [{ parallel: true }] }] } },
    ]) {
      expect(codeOf(() => stateDigest(canonicalJson(value)))).toBe('forbidden_key');
    }
  });

  it('refuses a non-string with invalid_high_data', () => {
    expect(codeOf(() => stateDigest(NGINX))).toBe('invalid_high_data');
  });

  it.each([
    ['a module and a dotted function of it', { a: { file: ['managed', { name: '/x' }], 'file.managed': [{ name: '/y' }] } }],
    ['two dotted functions of one module', { a: { 'cmd.run': [{ name: 'x' }], 'cmd.wait': [{ name: 'y' }] } }],
    ['a module split at its first dot only', { a: { 'file.managed': [], 'file.x.y': [] } }],
  ])('refuses a state body naming one state module twice (%s), like Salt\'s SLS compiler', (_name, value) => {
    expect(codeOf(() => stateDigest(canonicalJson(value)))).toBe('invalid_high_data');
    expect(codeOf(() => validateHighData(value))).toBe('invalid_high_data');
  });

  it('accepts different modules in one state and one module in different states', () => {
    expect(stateDigest(canonicalJson({ a: { 'file.managed': [], 'cmd.run': [], filex: [] }, b: { 'file.absent': [] } }))).toHaveLength(64);
  });
});

describe('validateHighData', () => {
  it('returns well-formed high data', () => {
    expect(validateHighData(NGINX)).toBe(NGINX);
  });

  it('applies the same limits and rules to a value', () => {
    const deep: unknown[] = [];
    let inner = deep;
    for (let level = 0; level < 40; level += 1) {
      const next: unknown[] = [];
      inner.push(next);
      inner = next;
    }
    expect(codeOf(() => validateHighData({ s: { m: deep } }))).toBe('high_data_too_deep');
    expect(codeOf(() => validateHighData({ s: { m: ['x'.repeat(65536)] } }))).toBe('high_data_too_large');
    expect(codeOf(() => validateHighData({ s: { m: [0.5] } }))).toBe('unsupported_json_value');
    expect(codeOf(() => validateHighData({ s: { m: [{ parallel: true }] } }))).toBe('forbidden_key');
    expect(codeOf(() => validateHighData({ s: {} }))).toBe('invalid_high_data');
    expect(codeOf(() => validateHighData({ s: { m: 'x' } }))).toBe('invalid_high_data');
  });

  it('ends on a cyclic value instead of looping', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['s'] = { m: [cyclic] };
    expect(codeOf(() => validateHighData(cyclic))).toBe('high_data_too_deep');
  });

  it('agrees with stateDigest on the canonical text of the value', () => {
    const value = validateHighData(NGINX);
    expect(stateDigest(canonicalJson(value))).toHaveLength(64);
  });
});
