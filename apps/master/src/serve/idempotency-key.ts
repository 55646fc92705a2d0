import { z } from 'zod';

/*
 * The Idempotency-Key request header (IETF httpapi draft): a Structured
 * Field sf-string (`"…"`: printable ASCII, with `\"` and `\\` as the only
 * escapes), or, as many clients send it, a bare token of visible ASCII.
 * After unquoting it holds 1 to 255 characters. Anything else, a repeated
 * header included, is malformed (400); the raw key is never stored or
 * logged (admission hashes it with its scope).
 */

const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/**
 * The header as a route declares it (and /openapi.json shows it). Only its
 * presence is checked there — a missing key is a headers validation error,
 * mapped to invalid_idempotency_key; the handler parses it.
 */
export const IdempotencyKeyHeadersSchema = z.object({
  'idempotency-key': z.string().describe('an sf-string ("…") or a token of visible ASCII, 1-255 characters after unquoting'),
});

export type KeyParse =
  | { readonly ok: true; readonly key: string }
  | { readonly ok: false; readonly why: 'missing' | 'malformed' | 'empty' | 'too_long' };

const BARE = /^[\x21-\x7e]+$/;

function unquote(raw: string): string | undefined {
  let out = '';
  for (let i = 1; i < raw.length; i += 1) {
    const c = raw.charCodeAt(i);
    if (c === 0x22) return i === raw.length - 1 ? out : undefined; // the closing quote ends the field
    if (c === 0x5c) {
      const next = raw[i + 1];
      if (next !== '"' && next !== '\\') return undefined;
      out += next;
      i += 1;
      continue;
    }
    if (c < 0x20 || c > 0x7e) return undefined;
    out += raw.charAt(i);
  }
  return undefined; // no closing quote
}

export function parseIdempotencyKey(header: string | readonly string[] | undefined): KeyParse {
  if (header === undefined) return { ok: false, why: 'missing' };
  if (typeof header !== 'string') return { ok: false, why: 'malformed' };
  const raw = header.trim();
  if (raw === '') return { ok: false, why: 'empty' };
  const key = raw.startsWith('"') ? unquote(raw) : BARE.test(raw) ? raw : undefined;
  if (key === undefined) return { ok: false, why: 'malformed' };
  if (key.length === 0) return { ok: false, why: 'empty' };
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) return { ok: false, why: 'too_long' };
  return { ok: true, key };
}

export function keyProblemDetail(why: Exclude<KeyParse, { ok: true }>['why']): string {
  switch (why) {
    case 'missing':
      return 'this request needs an Idempotency-Key header (a string of 1-255 printable ASCII characters)';
    case 'empty':
      return 'the Idempotency-Key is empty';
    case 'too_long':
      return `the Idempotency-Key is longer than ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`;
    case 'malformed':
      return 'the Idempotency-Key must be one sf-string ("…", printable ASCII, \\" and \\\\ escapes) or one token of visible ASCII';
  }
}
