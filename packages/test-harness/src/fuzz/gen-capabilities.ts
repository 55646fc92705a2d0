import fc from 'fast-check';
import { PINNED_SALT_VERSION, READINESS_MODULE_VERSION, READINESS_REASONS } from '@oduflow/protocol';
import { type FuzzCase, fuzzCase } from './fuzz-case.js';
import { hexString, sometimes, trickyString } from './gen-text.js';

/*
 * Capabilities answers of module 1.1.0 (six keys): ready exactly when there
 * are no reasons, reasons a duplicate-free subsequence of READINESS_REASONS,
 * a semver module version, a SHA-256 digest; then every field perturbed.
 */

/** Semantic versions at the edges of the semver.org pattern, valid and not. */
const SEMVER_EDGES = [
  '1.1.0', '0.0.0', '1.0.0-alpha', '1.0.0-alpha.1', '1.0.0-0.3.7', '1.0.0-x.7.z.92', '1.0.0-alpha+001', '1.0.0+20130313144700',
  '1.0.0-beta+exp.sha.5114f85', '1.0.0--', '1.0.0-0a', '99999999999999999999.0.0', '1.1.0-rc.1+build.2',
  '01.1.0', '1.01.0', '1.1.01', '1.1', '1.1.0.0', '1.1.0-', '1.1.0+', '1.1.0-01', '1.1.0-alpha..1', 'v1.1.0', '1.1.0\n',
  ' 1.1.0', '1.1.0 ', '\u0661.1.0', '1.1.0-\u03b1', '1.1.0+b\u00e9', '1.1.0-a_b', '', '1..0', '-1.1.0', '1.1.0-+',
] as const;

const SALT_VERSIONS = [PINNED_SALT_VERSION, '3006.26', '3007.1', '', '3006.27 ', 'salt'] as const;

const validCapabilities = fc
  .record({
    module_version: fc.oneof({ arbitrary: fc.constant(READINESS_MODULE_VERSION), weight: 3 }, { arbitrary: fc.constantFrom(...SEMVER_EDGES.slice(0, 13)), weight: 1 }),
    salt_version: fc.oneof(fc.constantFrom(...SALT_VERSIONS), trickyString),
    module_sha256: hexString(64),
    reasons: fc.oneof({ arbitrary: fc.constant<string[]>([]), weight: 2 }, { arbitrary: fc.subarray([...READINESS_REASONS], { minLength: 1 }), weight: 2 }),
  })
  .map(({ reasons, ...rest }) => ({ protocol: 1, ...rest, ready: reasons.length === 0, reasons }));

type Capabilities = Record<string, unknown>;

const FIELD_EDITS: ReadonlyArray<readonly [string, (c: Capabilities, pick: number) => unknown]> = [
  ['protocol', (_c, n) => [0, 2, '1', true, null, 1.5][n % 6]],
  ['module_version', (_c, n) => SEMVER_EDGES[n % SEMVER_EDGES.length]],
  ['module_version', (_c, n) => [null, 110, ['1.1.0']][n % 3]],
  ['salt_version', (_c, n) => [3006.27, null, ['3006.27'], true][n % 4]],
  ['module_sha256', (c, n) => { const d = String(c['module_sha256']); return [d.toUpperCase(), d.slice(1), `${d}0`, `${d}\n`, null, 'z'.repeat(64)][n % 6]; }],
  ['ready', (c, n) => [!c['ready'], 1, 0, 'true', null][n % 5]],
  ['reasons', (c, n) => { const r = Array.isArray(c['reasons']) ? (c['reasons'] as string[]) : []; return [[...r].reverse(), [...r, ...r.slice(0, 1)], [...r, 'unknown_reason'], 'salt_version', null, [1], [...r, 'salt_version '], r.slice(1)][n % 8]; }],
];

function edited(c: Capabilities, edit: number, pick: number, remove: boolean, extra: boolean): [Capabilities, string] {
  const copy: Capabilities = { ...c };
  const [field, change] = FIELD_EDITS[edit % FIELD_EDITS.length] as (typeof FIELD_EDITS)[number];
  if (remove) {
    const { [field]: _removed, ...without } = copy;
    return [without, `without ${field}`];
  }
  if (extra) {
    copy[['message', 'capability', 'module'][pick % 3] as string] = 'x';
    return [copy, 'with an extra key'];
  }
  copy[field] = change(c, pick);
  return [copy, `${field} changed`];
}

export const capabilitiesCase: fc.Arbitrary<FuzzCase> = fc
  .tuple(validCapabilities, fc.array(fc.tuple(fc.nat(), fc.nat(), fc.boolean(), fc.boolean()), { maxLength: 2 }), sometimes(fc.constantFrom<unknown>(null, [], 'x', { protocol: 1, capability: 'oduflow_job', version: '1.0.0' }), 20))
  .map(([valid, edits, other]) => {
    if (other !== undefined) return fuzzCase('capabilities', { answer: other }, 'a capabilities answer that is not of module 1.1.0');
    let answer = valid;
    const labels = [valid.ready ? 'ready' : 'not ready'];
    for (const [edit, pick, remove, extra] of edits) {
      const [next, label] = edited(answer, edit, pick, remove && pick % 3 === 0, extra && pick % 5 === 0);
      answer = next as typeof valid;
      labels.push(label);
    }
    return fuzzCase('capabilities', { answer }, `capabilities: ${labels.join(', ')}`);
  });
