import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { modulePath } from '@oduflow/minion-wrapper';
import type fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { runDifferentialFuzz } from './differential.js';
import { fixtureDraftFor } from './fixture-writer.js';
import type { FuzzCase } from './fuzz-case.js';
import { identityCase } from './gen-identity.js';
import { serializeCase } from './gen-json.js';
import { asciiJson, protocolOutcome, sameOutcome } from './outcome.js';
import { PythonOracle } from './python-oracle.js';

/*
 * The fuzzer is only worth its zero if it finds a real bug: each test plants
 * one in a copy of oduflow_job.py (one line changed), fuzzes the copy, and
 * expects the disagreement found, shrunk and turned into a fixture that
 * the real module passes and the planted one fails.
 */

const source = readFileSync(modulePath(), 'utf8');
const scratch = mkdtempSync(join(tmpdir(), 'oduflow-fuzz-mutant-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Planted {
  readonly name: string;
  readonly line: string;
  readonly replacement: string;
  readonly arbitrary: fc.Arbitrary<FuzzCase>;
  readonly expectShrunk: (c: FuzzCase) => boolean;
}

const PLANTED: readonly Planted[] = [
  {
    name: 'a JID pattern that lets a trailing newline through',
    line: '_JID_RE = re.compile("[0-9]{20}")',
    replacement: '_JID_RE = re.compile("[0-9]{20}\\n?")',
    arbitrary: identityCase,
    expectShrunk: (c) => c.category === 'identity' && c.input.kind === 'jid' && typeof c.input.value === 'string' && c.input.value.endsWith('\n'),
  },
  {
    name: 'object keys sorted by code point instead of UTF-16 code unit',
    line: 'sorted(keys, key=_utf16_sort_key)',
    replacement: 'sorted(keys)',
    arbitrary: serializeCase,
    expectShrunk: (c) => c.category === 'canonical_json' && JSON.stringify(c.input).length < 200,
  },
];

describe('the differential fuzzer against a planted bug', () => {
  it.each(PLANTED)('finds, shrinks and records $name', async (planted) => {
    expect(source).toContain(planted.line);
    const path = join(scratch, `${planted.name.replace(/[^a-z]+/g, '-')}.py`);
    writeFileSync(path, source.replace(planted.line, planted.replacement));
    const mutant = PythonOracle.start({ modulePath: path });
    const real = PythonOracle.start();
    try {
      const report = await runDifferentialFuzz(mutant, { cases: 4000, seed: 1, arbitrary: planted.arbitrary });
      expect(report.disagreeing).toBeGreaterThan(0);
      const [first] = report.disagreements;
      if (first === undefined) expect.fail('no disagreement reported');
      expect(planted.expectShrunk(first.case), JSON.stringify(first.case)).toBe(true);
      console.info(`planted ${planted.name}: ${report.disagreeing} of ${report.cases} disagreed; shrunk to ${asciiJson(first.case.input)}`);
      const draft = fixtureDraftFor(first, 1);
      if (draft === undefined) expect.fail('no fixture drafted');
      // The fixture holds TypeScript's answer: the real module agrees with it, the planted one does not.
      const [realAnswer] = await real.evaluate([first.case]);
      const [mutantAnswer] = await mutant.evaluate([first.case]);
      expect(sameOutcome(protocolOutcome(first.case), realAnswer as never)).toBe(true);
      expect(sameOutcome(protocolOutcome(first.case), mutantAnswer as never)).toBe(false);
    } finally {
      await Promise.all([mutant.close(), real.close()]);
    }
  }, 120_000);
});
