import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixturesDir, fixtureFileSchema, loadAllFixtures } from '../fixtures.js';
import type { Disagreement } from './differential.js';
import { appendFixtureCases, corpusJson, fixtureDraftFor } from './fixture-writer.js';
import { fuzzCase } from './fuzz-case.js';

function hasIntegerLikeKey(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(hasIntegerLikeKey);
  if (typeof value !== 'object' || value === null) return false;
  return Object.entries(value).some(([key, child]) => /^(?:0|[1-9][0-9]*)$/.test(key) || hasIntegerLikeKey(child));
}

const jidDisagreement: Disagreement = {
  case: fuzzCase('identity', { kind: 'jid', value: '20261129082300245264\n' }, 'jid near miss: trailing newline'),
  typescript: { kind: 'error', code: 'invalid_jid' },
  python: { kind: 'ok', bytes: '"20261129082300245264\\n"' },
  replay: { seed: 7, path: '12' },
  occurrences: 3,
};

describe('the fixture writer', () => {
  let scratch: string | undefined;
  afterEach(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
    scratch = undefined;
  });

  it('writes a case exactly as the corpus files lay theirs out', () => {
    let verbatim = 0;
    for (const file of loadAllFixtures()) {
      const text = readFileSync(join(fixturesDir(), `${file.category}.json`), 'utf8');
      for (const testCase of file.cases) {
        if (text.includes(corpusJson(testCase, '    '))) {
          verbatim += 1;
          continue;
        }
        // What JavaScript cannot keep as written: integer-like keys (always
        // enumerated first) and bare numbers spelt 1.0, -0.0 or past 2^53. The
        // fuzzer never writes either (its cases come from JSON.stringify). And
        // a few values the corpus holds compacted on one line by hand.
        const block = text.slice(text.indexOf(`"id": "${testCase.id}"`)).split('"id": "')[1] ?? '';
        const compacted = /": [[{][^\n\]}]/.test(block);
        const rewritten = hasIntegerLikeKey(testCase) || /[:,[]\s*-?[0-9]+(?:\.[0-9]+|[eE][-+]?[0-9]+)|[:,[]\s*-?[0-9]{16,}/.test(block);
        expect(rewritten || compacted, `${testCase.id} is not laid out as corpusJson writes it`).toBe(true);
      }
    }
    expect(verbatim).toBeGreaterThan(900);
  });

  it('drafts a case that expects the TypeScript answer and says where it came from', () => {
    const draft = fixtureDraftFor(jidDisagreement, 99);
    expect(draft?.category).toBe('identity');
    expect(draft?.case).toMatchObject({ input: { kind: 'jid', value: '20261129082300245264\n' }, error: 'invalid_jid' });
    expect(draft?.case.id).toMatch(/^identity\/fuzz-[0-9a-f]{12}$/);
    expect(draft?.case.description).toContain('run seed 99, replay seed 7 path 12');
  });

  it('takes the Python answer when TypeScript threw, and drafts nothing when both did', () => {
    const tsThrew = fixtureDraftFor({ ...jidDisagreement, typescript: { kind: 'crash', name: 'RangeError' } }, 1);
    expect(tsThrew?.case.expect).toBe('20261129082300245264\n');
    expect(fixtureDraftFor({ ...jidDisagreement, typescript: { kind: 'crash', name: 'RangeError' }, python: { kind: 'crash', name: 'TypeError' } }, 1)).toBeUndefined();
  });

  it('appends a new case, once, and leaves the rest of the file as it was', () => {
    scratch = mkdtempSync(join(tmpdir(), 'oduflow-fuzz-fixtures-'));
    cpSync(fixturesDir(), scratch, { recursive: true });
    const before = readFileSync(join(scratch, 'identity.json'), 'utf8');
    const draft = fixtureDraftFor(jidDisagreement, 1);
    if (draft === undefined) expect.fail('no draft');
    expect(appendFixtureCases([draft, draft], scratch)).toStrictEqual([draft.case.id]);
    expect(appendFixtureCases([draft], scratch)).toStrictEqual([]);
    const after = readFileSync(join(scratch, 'identity.json'), 'utf8');
    const cut = before.lastIndexOf('\n  ]\n}');
    expect(after.slice(0, cut)).toBe(before.slice(0, cut));
    expect(after.endsWith(before.slice(cut))).toBe(true);
    const parsed = fixtureFileSchema('identity').parse(JSON.parse(after));
    expect(parsed.cases.at(-1)).toStrictEqual(draft.case);
    expect(parsed.cases).toHaveLength(fixtureFileSchema('identity').parse(JSON.parse(before)).cases.length + 1);
  });
});
