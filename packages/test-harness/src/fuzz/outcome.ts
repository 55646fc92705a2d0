import { ProtocolError, canonicalJson } from '@oduflow/protocol';
import { runProtocolCase } from '../fixture-runners.js';
import type { FuzzCase } from './fuzz-case.js';

/**
 * What one implementation answered to a case: the bytes of its result (its
 * canonical JSON; for a result outside the canonical domain, such as a
 * validated answer that carries a lone surrogate, `~` and a strict JSON
 * rendering both languages write alike), a protocol error code, or an
 * exception of any other kind (always a finding, in either language).
 */
export type Outcome =
  | { readonly kind: 'ok'; readonly bytes: string }
  | { readonly kind: 'error'; readonly code: string }
  | { readonly kind: 'crash'; readonly name: string };

/** @oduflow/protocol's outcome for a case (as sent: see asSent). */
export function protocolOutcome(c: FuzzCase): Outcome {
  let result: unknown;
  try {
    result = runProtocolCase(c.category, c.input);
  } catch (error) {
    if (ProtocolError.isInstance(error)) return { kind: 'error', code: error.code };
    return { kind: 'crash', name: error instanceof Error ? error.name : typeof error };
  }
  try {
    return { kind: 'ok', bytes: canonicalJson(result) };
  } catch {
    return { kind: 'ok', bytes: `~${strictJson(result)}` };
  }
}

/** JSON with everything outside printable ASCII escaped, as Python's `json.dumps(ensure_ascii=True)`: what a report shows (a private-use or zero-width character stays visible). */
export function asciiJson(value: unknown): string {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- typed string, but undefined for undefined, a function or a symbol
  return (JSON.stringify(value) ?? String(value)).replace(/[\u007f-\uffff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function asciiString(text: string): string {
  return asciiJson(text);
}

/**
 * Any JSON-like value, keys in UTF-16 order, strings ASCII-escaped; the same
 * rendering as fuzz_oracle.py's `_strict_json`. A number is written as
 * JavaScript writes it (a Python float is `1.0`, so it never matches).
 */
function strictJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(strictJson).join(',')}]`;
  if (typeof value === 'string') return asciiString(value);
  if (typeof value === 'object' && value !== null) {
    const object = value as Record<string, unknown>;
    return `{${Object.keys(object)
      .sort()
      .map((key) => `${asciiString(key)}:${strictJson(object[key])}`)
      .join(',')}}`;
  }
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- typed string, but undefined for undefined, a function or a symbol
  return JSON.stringify(value) ?? String(value);
}

/** Same accept/reject, same code, same bytes; a crash never agrees with anything. */
export function sameOutcome(a: Outcome, b: Outcome): boolean {
  if (a.kind === 'crash' || b.kind === 'crash') return false;
  if (a.kind === 'ok' && b.kind === 'ok') return a.bytes === b.bytes;
  if (a.kind === 'error' && b.kind === 'error') return a.code === b.code;
  return false;
}

/** A short description for a report: generated test data, so a result is shown (cut at 120 characters). */
export function describeOutcome(o: Outcome): string {
  switch (o.kind) {
    case 'ok':
      return `accepted ${asciiJson(o.bytes.length > 120 ? `${o.bytes.slice(0, 120)}...` : o.bytes)}`;
    case 'error':
      return `rejected with ${o.code}`;
    case 'crash':
      return `threw ${o.name}`;
  }
}
