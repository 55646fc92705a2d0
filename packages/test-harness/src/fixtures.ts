import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROTOCOL_ERROR_CODES } from '@oduflow/protocol';
import { z } from 'zod';

const PACKAGE_NAME = '@oduflow/test-harness';

/**
 * The directory of this module, in every form it runs in: the CJS build has
 * `__dirname`; the ESM build (and vitest on the sources) has `import.meta.url`.
 * The CJS branch is taken first, so esbuild's empty `import.meta` in CJS
 * output is never read.
 */
function moduleDirectory(): string {
  return typeof __dirname === 'string' ? __dirname : dirname(fileURLToPath(import.meta.url));
}

/** Walks up from `start` to the directory whose package.json is this package (src/ and dist/ sit at different depths). */
function findPackageRoot(start: string): string {
  for (let directory = start; ; directory = dirname(directory)) {
    const manifest = join(directory, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === PACKAGE_NAME) {
      return directory;
    }
    if (dirname(directory) === directory) throw new Error(`cannot find the ${PACKAGE_NAME} package root above ${start}`);
  }
}

/** Absolute path of the shared fixture corpus. */
export const FIXTURES_DIR: string = join(findPackageRoot(moduleDirectory()), 'fixtures');

/** Absolute path of the JSON Schema every fixture file satisfies. */
export const FIXTURE_SCHEMA_PATH: string = join(FIXTURES_DIR, 'fixture.schema.json');

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
  return { category: fileCategory as C, description, cases: cases as FixtureCase<C>[] };
}

/** Reads and validates `fixtures/<category>.json`. */
export function loadFixtureFile<C extends FixtureCategory>(category: C): FixtureFile<C> {
  return parseFixtureFile(category, join(FIXTURES_DIR, `${category}.json`));
}

function isFixtureCategory(name: string): name is FixtureCategory {
  return (FIXTURE_CATEGORIES as readonly string[]).includes(name);
}

/** Reads and validates every `<category>.json` present in the corpus; any other JSON file there (bar the schema) is an error. */
export function loadAllFixtures(): FixtureFile[] {
  const files = readdirSync(FIXTURES_DIR)
    .filter((name) => name.endsWith('.json') && name !== 'fixture.schema.json')
    .sort();
  return files.map((name) => {
    const category = name.slice(0, -'.json'.length);
    if (!isFixtureCategory(category)) throw new Error(`${name} in ${FIXTURES_DIR} is not a fixture category`);
    return parseFixtureFile(category, join(FIXTURES_DIR, name)) as FixtureFile;
  });
}
