import fc from 'fast-check';
import { canonicalJson, parseCanonicalJson } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { PROTOCOL_CATEGORIES } from '../fixture-runners.js';
import { fixtureFileSchema } from '../fixtures.js';
import { anyFuzzCase, asSent } from './cases.js';
import { domainValue, plan } from './gen-json.js';
import { DEVIATIONS, misSerialize } from './mis-serialize.js';

const SEED = 424_242;

describe('the fuzz case generators', () => {
  const sample = fc.sample(anyFuzzCase, { seed: SEED, numRuns: 2000 }).map(asSent);

  it('cover every category the two languages share', () => {
    expect(new Set(sample.map((c) => c.category))).toStrictEqual(new Set(PROTOCOL_CATEGORIES));
  });

  it('only make cases the fixture corpus can hold, so any disagreement can be saved', () => {
    const schemas = new Map(PROTOCOL_CATEGORIES.map((category) => [category, fixtureFileSchema(category)]));
    for (const c of sample) {
      const file = { category: c.category, description: 'x', cases: [{ id: `${c.category}/fuzz-0`, description: c.label, input: c.input, error: 'internal_error' }] };
      const parsed = schemas.get(c.category)?.safeParse(file);
      if (parsed === undefined) expect.fail(`no schema for ${c.category}`);
      expect(parsed.success, `${c.label}: ${JSON.stringify(c.input).slice(0, 200)}`).toBe(true);
    }
  });

  it('label every case with what it probes', () => {
    expect(sample.filter((c) => c.label.length === 0)).toStrictEqual([]);
  });
});

describe('the deliberate mis-serializer', () => {
  it('writes exactly the canonical form when told to deviate nowhere', () => {
    fc.assert(
      fc.property(domainValue, (value) => {
        expect(misSerialize(value, { deviation: 'none', node: 0, detail: 0 })).toBe(canonicalJson(value));
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('writes a text canonical JSON parsing refuses whenever the deviation found a node to take it', () => {
    fc.assert(
      fc.property(domainValue, plan, (value, p) => {
        const text = misSerialize(value, p);
        fc.pre(text !== canonicalJson(value));
        expect(() => parseCanonicalJson(text)).toThrow();
      }),
      { seed: SEED, numRuns: 1000 },
    );
  });

  it('has a deviation that changes something for every kind of node', () => {
    // Keys that sort one way by UTF-16 code unit and the other by code point.
    const value = { '\u{10000}': [1, 'xy'], '\ue000': { c: null, d: true } };
    const unchanged = DEVIATIONS.filter((deviation) => deviation !== 'none' && misSerialize(value, { deviation, node: 0, detail: 0 }) === canonicalJson(value));
    expect(unchanged).toStrictEqual([]);
  });
});
