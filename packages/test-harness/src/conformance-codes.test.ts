import { readFileSync } from 'node:fs';
import { modulePath } from '@oduflow/minion-wrapper';
import { PROTOCOL_ERROR_CODES, READINESS_REASONS, REFUSAL_REASONS } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';

/*
 * The Python module and @oduflow/protocol share one closed set of error codes
 * and the readiness and refusal vocabularies. The fixtures hold the
 * validators together; this holds the rest of the module to the same sets by
 * reading its source: every code it can raise or answer is one the master
 * knows, and every readiness and refusal word the master knows is one the
 * module can send.
 */

const source = readFileSync(modulePath(), 'utf8');

/** A Python string literal ('x' or "x") made of code characters only. */
const LITERAL = String.raw`["']([a-z][a-z0-9_]*)["']`;

/** `ProtocolError("code", ...)`, the first argument on the same or the next line. */
function raisedCodes(text: string): string[] {
  return [...text.matchAll(new RegExp(String.raw`ProtocolError\(\s*${LITERAL}`, 'g'))].map((m) => m[1] as string);
}

/** `"error": "code"` in an answer the module builds itself. */
function answeredCodes(text: string): string[] {
  return [...text.matchAll(new RegExp(String.raw`["']error["']\s*:\s*${LITERAL}`, 'g'))].map((m) => m[1] as string);
}

/** The string literals of a module-level tuple or list `NAME = (...)`, or undefined when the module has none. */
function pythonConstant(text: string, name: string): string[] | undefined {
  const match = new RegExp(String.raw`^${name}\s*=\s*[(\[]([^)\]]*)[)\]]`, 'm').exec(text);
  if (match === null) return undefined;
  return [...(match[1] as string).matchAll(/["']([^"']*)["']/g)].map((m) => m[1] as string);
}

function quoted(text: string, word: string): boolean {
  return text.includes(`"${word}"`) || text.includes(`'${word}'`);
}

const known = new Set<string>(PROTOCOL_ERROR_CODES);

describe('oduflow_job.py speaks the codes of @oduflow/protocol', () => {
  it('is found and raises codes at all (the patterns still match the source)', () => {
    expect(raisedCodes(source).length).toBeGreaterThan(10);
    expect(answeredCodes(source)).toContain('internal_error');
  });

  it('raises and answers only codes in PROTOCOL_ERROR_CODES', () => {
    const unknown = [...new Set([...raisedCodes(source), ...answeredCodes(source)])].filter((code) => !known.has(code));
    expect(unknown, `oduflow_job.py uses error codes the master does not know; append them to PROTOCOL_ERROR_CODES: ${unknown.join(', ')}`).toStrictEqual([]);
  });

  it('can send every readiness reason the master knows', () => {
    const absent = READINESS_REASONS.filter((reason) => !quoted(source, reason));
    expect(absent, `oduflow_job.py never sends these READINESS_REASONS (module 1.1.0 not in place?): ${absent.join(', ')}`).toStrictEqual([]);
  });

  it('can send every refusal reason the master knows', () => {
    const absent = REFUSAL_REASONS.filter((reason) => !quoted(source, reason));
    expect(absent, `oduflow_job.py never sends these REFUSAL_REASONS (module 1.1.0 not in place?): ${absent.join(', ')}`).toStrictEqual([]);
  });

  it('keeps its own copies of the closed sets, if it has them, equal to the master ones and in the same order', () => {
    for (const [name, ours] of [
      ['READINESS_REASONS', READINESS_REASONS],
      ['REFUSAL_REASONS', REFUSAL_REASONS],
    ] as const) {
      const theirs = pythonConstant(source, name);
      if (theirs !== undefined) expect(theirs, `oduflow_job.py ${name}`).toStrictEqual([...ours]);
    }
  });
});

describe('the source readers of this test', () => {
  const sample = [
    'raise ProtocolError("invalid_jid", "JID must be ...")',
    'raise ProtocolError(',
    '    "execution_busy", "another managed apply is running"',
    ')',
    'return {"protocol": PROTOCOL, "error": "internal_error", "message": "x"}',
    'READINESS_REASONS = (',
    '    "salt_version",',
    '    "multiprocessing",',
    ')',
  ].join('\n');

  it('find a code on the same line and on the next one', () => {
    expect(raisedCodes(sample)).toStrictEqual(['invalid_jid', 'execution_busy']);
  });

  it('find a code in an answer literal', () => {
    expect(answeredCodes(sample)).toStrictEqual(['internal_error']);
  });

  it('read a module-level tuple of strings', () => {
    expect(pythonConstant(sample, 'READINESS_REASONS')).toStrictEqual(['salt_version', 'multiprocessing']);
    expect(pythonConstant(sample, 'REFUSAL_REASONS')).toBeUndefined();
  });
});
