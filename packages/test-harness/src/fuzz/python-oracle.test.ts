import { canonicalJson } from '@oduflow/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_CATEGORIES } from '../fixture-runners.js';
import { loadAllFixtures } from '../fixtures.js';
import { fuzzCase, type FuzzCase } from './fuzz-case.js';
import { type Outcome, protocolOutcome, sameOutcome } from './outcome.js';
import { PythonOracle } from './python-oracle.js';

/*
 * The oracle must ask the module exactly what the corpus runner
 * (python/test_conformance.py) asks: the whole corpus goes through it and
 * every answer must be the fixture's.
 */

/** True when `value` holds a -0, which reaches the oracle as 0 (JSON.stringify writes it so); the corpus runner reads the file's `-0.0`. */
function holdsNegativeZero(value: unknown): boolean {
  if (Object.is(value, -0)) return true;
  return typeof value === 'object' && value !== null && Object.values(value).some(holdsNegativeZero);
}

const corpusCases = loadAllFixtures()
  .filter((file) => (PROTOCOL_CATEGORIES as readonly string[]).includes(file.category))
  .flatMap((file) => file.cases.filter((c) => c.python !== false && !holdsNegativeZero(c.input)).map((c) => ({ category: file.category, fixture: c })));

const RECEIPT = {
  protocol: 1,
  minion_id: 'client-0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0b',
  request_id: '3f1c9a2e-5b7d-4c8e-9f0a-1b2c3d4e5f60',
  jid: '20261129082300245264',
  profile: 'configure',
  state_digest: '',
  status: 'succeeded',
  passed: 1,
  total: 1,
};

function expected(fixture: (typeof corpusCases)[number]['fixture']): Outcome {
  return fixture.error !== undefined ? { kind: 'error', code: fixture.error } : { kind: 'ok', bytes: canonicalJson(fixture.expect) };
}

describe('the Python fuzz oracle', () => {
  let oracle: PythonOracle;
  beforeAll(() => {
    oracle = PythonOracle.start();
  });
  afterAll(async () => {
    await oracle.close();
  });

  it('answers every corpus case as the fixture expects, in batches', async () => {
    const cases = corpusCases.map(({ category, fixture }) => ({ category, input: fixture.input, label: fixture.id }) as FuzzCase);
    const answers: Outcome[] = [];
    for (let i = 0; i < cases.length; i += 100) answers.push(...(await oracle.evaluate(cases.slice(i, i + 100))));
    const wrong = corpusCases.filter(({ fixture }, i) => JSON.stringify(answers[i]) !== JSON.stringify(expected(fixture))).map(({ fixture }) => fixture.id);
    expect(wrong).toStrictEqual([]);
    expect(answers.length).toBeGreaterThan(600);
  });

  it('reports an exception that is not a protocol error as a crash, by type, as the TypeScript side does', async () => {
    // A binding key outside the five is a programming error in both languages.
    const misspelt = fuzzCase('receipt', { receipt: RECEIPT, binding: { jid_typo: RECEIPT.jid } as never }, 'misspelt binding key');
    const [answer] = await oracle.evaluate([misspelt]);
    expect(answer).toStrictEqual({ kind: 'crash', name: 'TypeError' });
    expect(protocolOutcome(misspelt)).toStrictEqual({ kind: 'crash', name: 'TypeError' });
    expect(sameOutcome(answer as Outcome, protocolOutcome(misspelt))).toBe(false);
  });

  it('answers a result outside the canonical domain as a strict rendering marked with ~', async () => {
    const answer = {
      protocol: 1,
      module_version: '1.1.0',
      salt_version: '\udc00',
      module_sha256: '0'.repeat(64),
      ready: true,
      reasons: [],
    };
    const [outcome] = await oracle.evaluate([fuzzCase('capabilities', { answer }, 'lone surrogate in salt_version')]);
    expect(outcome).toStrictEqual({ kind: 'ok', bytes: '~{"module_sha256":"0000000000000000000000000000000000000000000000000000000000000000","module_version":"1.1.0","protocol":1,"ready":true,"reasons":[],"salt_version":"\\udc00"}' });
  });

  it('fails the batch with the reason when the module cannot be loaded', async () => {
    const broken = PythonOracle.start({ modulePath: '/nonexistent/oduflow_job.py' });
    await expect(broken.evaluate([fuzzCase('identity', { kind: 'jid', value: '1' }, 'x')])).rejects.toThrow(/exited .*FileNotFoundError|No such file/s);
  });
});
