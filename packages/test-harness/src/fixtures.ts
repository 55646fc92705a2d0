import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PROTOCOL_ERROR_CODES } from '@oduflow/protocol';
import { z } from 'zod';
import { harnessRoot } from './package-root.js';

/** Absolute path of the shared fixture corpus. */
export function fixturesDir(): string {
  return join(harnessRoot(), 'fixtures');
}

/** Absolute path of the JSON Schema every fixture file satisfies. */
export function fixtureSchemaPath(): string {
  return join(fixturesDir(), 'fixture.schema.json');
}

export const FIXTURE_CATEGORIES = [
  'identity',
  'canonical_json',
  'high_data',
  'reduction',
  'receipt',
  'status_answer',
  'capabilities',
  'transitions',
] as const;
export type FixtureCategory = (typeof FIXTURE_CATEGORIES)[number];

/** Any JSON value, but present: `z.unknown()` would also accept a missing key. */
const present = z.custom<unknown>((value) => value !== undefined, { message: 'required' });

const bindingInput = z.strictObject({
  minion_id: present.optional(),
  request_id: present.optional(),
  jid: present.optional(),
  profile: present.optional(),
  state_digest: present.optional(),
});

const INPUT_SCHEMAS = {
  identity: z.strictObject({ kind: z.enum(['request_id', 'minion_id', 'jid']), value: present }),
  canonical_json: z.discriminatedUnion('op', [
    z.strictObject({ op: z.literal('serialize'), value: present }),
    z.strictObject({ op: z.literal('parse'), text: z.string() }),
  ]),
  high_data: z.strictObject({ state_data_json: z.string() }),
  reduction: z.strictObject({ state_return: present }),
  receipt: z.strictObject({ receipt: present, binding: bindingInput.optional() }),
  status_answer: z.strictObject({ answer: present, binding: bindingInput }),
  capabilities: z.strictObject({ answer: present }),
  transitions: z.strictObject({ record: z.record(z.string(), z.unknown()), event: z.record(z.string(), z.unknown()) }),
} as const;

type InputSchemas = typeof INPUT_SCHEMAS;
export type FixtureInput<C extends FixtureCategory> = z.infer<InputSchemas[C]>;

interface CaseCommon<C extends FixtureCategory> {
  id: string;
  description: string;
  input: FixtureInput<C>;
  /** `false`: the input reads differently in Python after `json.load`; the Python runner skips the case. */
  python?: boolean | undefined;
}
/** A case expects either a result or a protocol error code, never both. */
export type FixtureCase<C extends FixtureCategory = FixtureCategory> = CaseCommon<C> &
  ({ expect: unknown; error?: never } | { error: (typeof PROTOCOL_ERROR_CODES)[number]; expect?: never });

export interface FixtureFile<C extends FixtureCategory = FixtureCategory> {
  category: C;
  description: string;
  cases: FixtureCase<C>[];
}

function caseSchema<C extends FixtureCategory>(category: C) {
  const common = {
    id: z.string().regex(new RegExp(`^${category}/[a-z0-9]+(?:-[a-z0-9]+)*$`)),
    description: z.string().min(1),
    input: INPUT_SCHEMAS[category],
    python: z.boolean().optional(),
  };
  return z.union([
    z.strictObject({ ...common, expect: present }),
    z.strictObject({ ...common, error: z.enum(PROTOCOL_ERROR_CODES) }),
  ]);
}

/** The zod form of `fixtures/fixture.schema.json` for one category's file. */
export function fixtureFileSchema<C extends FixtureCategory>(category: C) {
  return z.strictObject({
    $schema: z.string().optional(),
    category: z.literal(category),
    description: z.string().min(1),
    cases: z.array(caseSchema(category)).min(1),
  });
}

function parseFixtureFile<C extends FixtureCategory>(category: C, path: string): FixtureFile<C> {
  const parsed = fixtureFileSchema(category).safeParse(JSON.parse(readFileSync(path, 'utf8')));
  if (!parsed.success) throw new Error(`${path} is not a valid ${category} fixture file:\n${z.prettifyError(parsed.error)}`);
  const { category: fileCategory, description, cases } = parsed.data;
  return { category: fileCategory, description, cases: cases as FixtureCase<C>[] };
}

/** Reads and validates `fixtures/<category>.json`. */
export function loadFixtureFile<C extends FixtureCategory>(category: C): FixtureFile<C> {
  return parseFixtureFile(category, join(fixturesDir(), `${category}.json`));
}

function isFixtureCategory(name: string): name is FixtureCategory {
  return (FIXTURE_CATEGORIES as readonly string[]).includes(name);
}

/** Reads and validates every `<category>.json` present in the corpus; any other JSON file there (bar the schema) is an error. */
export function loadAllFixtures(): FixtureFile[] {
  const dir = fixturesDir();
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.json') && name !== 'fixture.schema.json')
    .sort();
  return files.map((name) => {
    const category = name.slice(0, -'.json'.length);
    if (!isFixtureCategory(category)) throw new Error(`${name} in ${dir} is not a fixture category`);
    return parseFixtureFile<FixtureCategory>(category, join(dir, name));
  });
}
