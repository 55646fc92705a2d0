import { readFileSync } from 'node:fs';
import { PROTOCOL_ERROR_CODES, ProtocolError } from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runProtocolCase, type ProtocolCategory } from './fixture-runners.js';
import { FIXTURE_CATEGORIES, fixtureSchemaPath, type FixtureCase, loadAllFixtures } from './fixtures.js';

/** The loader validated `input` against its category's schema, so the runner's input type holds. */
function run(category: ProtocolCategory, testCase: FixtureCase): unknown {
  return runProtocolCase(category, testCase.input);
}

function outcomeOf(thunk: () => unknown): { value: unknown } | { code: string } {
  try {
    return { value: thunk() };
  } catch (error) {
    if (ProtocolError.isInstance(error)) return { code: error.code };
    throw error;
  }
}

const corpus = loadAllFixtures();
const allCases = corpus.flatMap((file) => file.cases);

describe('the fixture corpus', () => {
  const jsonSchema = JSON.parse(readFileSync(fixtureSchemaPath(), 'utf8')) as Record<string, unknown>;

  it.each(corpus.map((file) => [file.category, file] as const))('%s.json satisfies fixture.schema.json', (_name, file) => {
    const raw: unknown = JSON.parse(readFileSync(fixtureSchemaPath().replace('fixture.schema.json', `${file.category}.json`), 'utf8'));
    const result = z.fromJSONSchema(jsonSchema).safeParse(raw);
    expect(result.success, result.success ? '' : z.prettifyError(result.error)).toBe(true);
  });

  it('names exactly the protocol error codes in the JSON Schema', () => {
    const defs = jsonSchema['$defs'] as Record<string, { enum?: unknown }>;
    expect(defs['errorCode']?.enum).toStrictEqual([...PROTOCOL_ERROR_CODES]);
  });

  it('rejects a case that has both expect and error, or neither, under the JSON Schema', () => {
    const schema = z.fromJSONSchema(jsonSchema);
    const file = (extra: Record<string, unknown>) => ({
      category: 'reduction',
      description: 'x',
      cases: [{ id: 'reduction/x', description: 'x', input: { state_return: null }, ...extra }],
    });
    expect(schema.safeParse(file({ expect: null })).success).toBe(true);
    expect(schema.safeParse(file({ error: 'invalid_receipt' })).success).toBe(true);
    expect(schema.safeParse(file({})).success).toBe(false);
    expect(schema.safeParse(file({ expect: 1, error: 'invalid_receipt' })).success).toBe(false);
    expect(schema.safeParse(file({ error: 'no_such_code' })).success).toBe(false);
  });

  it('has a file for every category', () => {
    expect(corpus.map((file) => file.category).sort()).toStrictEqual(
      FIXTURE_CATEGORIES.filter((category) => category !== 'transitions' || corpus.some((file) => file.category === category)).sort(),
    );
  });

  it('uses every case id once across the whole corpus', () => {
    const ids = allCases.map((testCase) => testCase.id);
    const duplicates = ids.filter((id, index) => ids.indexOf(id) !== index);
    expect(duplicates).toStrictEqual([]);
  });

  it('holds at least 250 cases', () => {
    expect(allCases.length).toBeGreaterThanOrEqual(250);
  });
});

for (const file of corpus) {
  if (file.category === 'transitions') continue;
  const category = file.category;
  describe(`${category} fixtures against @oduflow/protocol`, () => {
    for (const testCase of file.cases) {
      it(`${testCase.id}: ${testCase.description}`, () => {
        const outcome = outcomeOf(() => run(category, testCase));
        if (testCase.error !== undefined) {
          expect(outcome).toStrictEqual({ code: testCase.error });
        } else {
          expect(outcome).toStrictEqual({ value: testCase.expect });
        }
      });
    }
  });
}
