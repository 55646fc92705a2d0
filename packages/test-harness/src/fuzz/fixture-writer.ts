import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixturesDir } from '../fixtures.js';
import type { Disagreement } from './differential.js';
import { describeOutcome } from './outcome.js';

/*
 * A disagreement becomes a case of the shared corpus (fixtures/README.md), so
 * both conformance runners keep it for good. The fuzzer cannot know which
 * side is wrong: the case expects what TypeScript answered (Python's answer
 * when TypeScript threw), so the runner of the other language fails until
 * someone decides; if TypeScript was the wrong one, the reviewer flips the
 * expectation and fixes @oduflow/protocol. Cases are appended as text, in
 * the corpus's own layout (two-space indent, non-ASCII as \u escapes), so
 * nothing else in the file changes.
 */

export interface FixtureDraft {
  readonly category: string;
  readonly case: { id: string; description: string; input: unknown; expect?: unknown; error?: string };
}

/** The corpus case for a disagreement, or undefined when both sides threw (no expectation to state). */
export function fixtureDraftFor(d: Disagreement, runSeed: number): FixtureDraft | undefined {
  const reference = d.typescript.kind !== 'crash' ? d.typescript : d.python;
  if (reference.kind === 'crash') return undefined;
  const input = d.case.input as unknown;
  const digest = createHash('sha256').update(JSON.stringify([d.case.category, input])).digest('hex').slice(0, 12);
  const description =
    `found by the differential fuzzer (run seed ${runSeed}, replay seed ${d.replay.seed} path ${d.replay.path}): ${d.case.label}; ` +
    `TypeScript ${describeOutcome(d.typescript)}, Python ${describeOutcome(d.python)}`;
  // A result outside the canonical domain comes as `~` and its strict JSON (outcome.ts).
  const bytes = reference.kind === 'ok' ? reference.bytes.replace(/^~/, '') : '';
  const outcome = reference.kind === 'ok' ? { expect: JSON.parse(bytes) as unknown } : { error: reference.code };
  return { category: d.case.category, case: { id: `${d.case.category}/fuzz-${digest}`, description, input, ...outcome } };
}

/** JSON text as Python's `json.dumps(indent=2, ensure_ascii=True)` writes it (the corpus layout). */
export function corpusJson(value: unknown, indent: string): string {
  const text = JSON.stringify(value, null, 2).replace(/[\u007f-\uffff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return text
    .split('\n')
    .map((line) => indent + line)
    .join('\n');
}

const CASES_END = '\n  ]\n}';

/**
 * Appends drafts to their category files under `dir` (default: the corpus),
 * skipping any whose id is already there. Returns the ids written.
 */
export function appendFixtureCases(drafts: readonly FixtureDraft[], dir: string = fixturesDir()): string[] {
  const written: string[] = [];
  const byCategory = new Map<string, FixtureDraft[]>();
  for (const draft of drafts) byCategory.set(draft.category, [...(byCategory.get(draft.category) ?? []), draft]);
  for (const [category, list] of byCategory) {
    const path = join(dir, `${category}.json`);
    let text = readFileSync(path, 'utf8');
    const present = new Set((JSON.parse(text) as { cases: Array<{ id: string }> }).cases.map((c) => c.id));
    const fresh = list.filter((draft) => !present.has(draft.case.id) && (present.add(draft.case.id), true));
    if (fresh.length === 0) continue;
    const end = text.lastIndexOf(CASES_END);
    if (end === -1) throw new Error(`${path} does not end the way the corpus files do; add the cases by hand`);
    const added = fresh.map((draft) => `,\n${corpusJson(draft.case, '    ')}`).join('');
    text = text.slice(0, end) + added + text.slice(end);
    writeFileSync(path, text);
    written.push(...fresh.map((draft) => draft.case.id));
  }
  return written;
}
