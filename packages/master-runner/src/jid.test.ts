import { describe, expect, it } from 'vitest';
import { jidForInstant, nextJid } from './jid.js';

describe('jidForInstant', () => {
  it('formats an instant as Salt %Y%m%d%H%M%S%f in UTC, 20 digits', () => {
    expect(jidForInstant(new Date('2026-11-29T08:23:00.245Z'))).toBe('20261129082300245000');
  });

  it('pads every field so the JID is always 20 digits', () => {
    expect(jidForInstant(new Date('2026-01-02T03:04:05.006Z'))).toBe('20260102030405006000');
  });

  it('refuses an invalid date instead of inventing a JID', () => {
    expect(() => jidForInstant(new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe('nextJid', () => {
  it('adds one microsecond exactly, beyond 2^53', () => {
    expect(nextJid('20261129082300245999')).toBe('20261129082300246000');
    expect(nextJid('99999999999999999998')).toBe('99999999999999999999');
  });
});
