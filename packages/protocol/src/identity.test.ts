import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJid, parseMinionId, parseRequestId } from './identity.js';
import { codeOf } from '../tests/support.js';

const RUNS = { seed: 20_261_129, numRuns: 300 };
const canonicalUuid = fc.uuid({ version: [1, 2, 3, 4, 5, 6, 7, 8] });


describe('parseRequestId', () => {
  it('returns every lowercase RFC 9562 UUID of versions 1-8 unchanged', () => {
    fc.assert(fc.property(canonicalUuid, (uuid) => {
        expect(parseRequestId(uuid)).toBe(uuid);
      }), RUNS);
  });

  it('rejects any such UUID once a character is uppercased or whitespace is added', () => {
    const mangle = fc.constantFrom(
      (uuid: string) => uuid.toUpperCase(),
      (uuid: string) => `${uuid}\n`,
      (uuid: string) => ` ${uuid}`,
      (uuid: string) => `{${uuid}}`,
    );
    const withLetter = canonicalUuid.filter((uuid) => /[a-f]/.test(uuid));
    fc.assert(
      fc.property(withLetter, mangle, (uuid, change) => {
        expect(codeOf(() => parseRequestId(change(uuid)))).toBe('invalid_request_id');
      }),
      RUNS,
    );
  });

  it.each([
    ['the nil UUID', '00000000-0000-0000-0000-000000000000'],
    ['the max UUID', 'ffffffff-ffff-ffff-ffff-ffffffffffff'],
    ['variant nibble c', '0190e6a5-1c2d-7e3f-ca4b-5c6d7e8f9a0b'],
    ['version nibble 9', '0190e6a5-1c2d-9e3f-8a4b-5c6d7e8f9a0b'],
    ['a number', 42],
    ['a boolean', true],
  ])('rejects %s', (_name, value) => {
    expect(codeOf(() => parseRequestId(value))).toBe('invalid_request_id');
  });
});

describe('parseMinionId', () => {
  it('returns client- followed by a canonical UUID', () => {
    fc.assert(fc.property(canonicalUuid, (uuid) => {
        expect(parseMinionId(`client-${uuid}`)).toBe(`client-${uuid}`);
      }), RUNS);
  });

  it('rejects a bare UUID, another prefix and a trailing newline', () => {
    const uuid = '3f1c9a2e-5b7d-4c8e-9f0a-1b2c3d4e5f60';
    for (const value of [uuid, `Client-${uuid}`, `client_${uuid}`, `client-${uuid}\n`]) {
      expect(codeOf(() => parseMinionId(value))).toBe('invalid_minion_id');
    }
  });
});

describe('parseJid', () => {
  it('returns a string of exactly 20 ASCII digits', () => {
    const jid = fc.string({ unit: fc.constantFrom('0', '1', '2', '3', '4', '5', '6', '7', '8', '9'), minLength: 20, maxLength: 20 });
    fc.assert(fc.property(jid, (value) => {
        expect(parseJid(value)).toBe(value);
      }), RUNS);
  });

  it('rejects Unicode digits that Python\'s \\d and str.isdigit would accept', () => {
    for (const digits of ['٠١٢٣٤٥٦٧٨٩٠١٢٣٤٥٦٧٨٩', '０１２３４５６７８９０１２３４５６７８９', `${'1'.repeat(19)}²`]) {
      expect(codeOf(() => parseJid(digits))).toBe('invalid_jid');
    }
  });

  it('rejects a JID given as a number, which cannot even hold 20 digits exactly', () => {
    // eslint-disable-next-line no-loss-of-precision -- the lost digits are the point
    expect(codeOf(() => parseJid(20261129082300245264))).toBe('invalid_jid');
  });

  it('does not echo the rejected value in its message', () => {
    try {
      parseJid('secret-token-value');
    } catch (error) {
      expect((error as Error).message).not.toContain('secret');
    }
  });
});
