import { describe, expect, it } from 'vitest';
import { rowMet } from './met.js';
import { collectResults, missingResults, renderMarkdown, verdictOf, type ExpectedBench } from './report.js';
import type { BenchResult, BenchRow } from './result.js';

const row = (over: Partial<BenchRow> = {}): BenchRow => ({
  label: 'dispatch, 3 records',
  unit: 'ms',
  value: { median: 12, min: 10, max: 15 },
  floor: { median: 8, min: 7, max: 9 },
  ratio: { median: 1.5, min: 1.2, max: 1.9 },
  higher_is_better: false,
  runs: 5,
  target: { kind: 'ratio_max', value: 1.25 },
  ...over,
});

const result = (over: Partial<BenchResult> = {}): BenchResult => ({
  schema: 1,
  id: 'store-dispatch-file',
  item: 3,
  title: 'Master store per dispatch (file store)',
  method: 'interleaved runs on ext4',
  floor: 'three bare atomic writes of the same sizes',
  mode: 'default',
  rows: [row()],
  chart: null,
  notes: ['the store writes five files per dispatch'],
  ok: true,
  ...over,
});

const file = (value: BenchResult | string, name = 'store-dispatch-file.json') => ({ name, text: typeof value === 'string' ? value : JSON.stringify(value) });

const EXPECTED: ExpectedBench[] = [
  { id: 'store-dispatch-file', item: 3, producer: 'master-runner', modes: ['default', 'full'] },
  { id: 'poll-sweep', item: 5, producer: 'master-runner (poll sweep)', modes: ['default', 'full'] },
  { id: 'lost-return-recovery', item: 6, producer: 'test-harness (live)', modes: ['full'] },
];

describe('met', () => {
  it('compares the median ratio with a ratio_max or ratio_min target', () => {
    expect(rowMet(row())).toBe(false);
    expect(rowMet(row({ target: { kind: 'ratio_max', value: 1.5 } }))).toBe(true);
    expect(rowMet(row({ higher_is_better: true, target: { kind: 'ratio_min', value: 0.5 } }))).toBe(true);
    expect(rowMet(row({ target: { kind: 'ratio_min', value: 2 } }))).toBe(false);
  });

  it('compares the median value with a value_max or value_min target', () => {
    expect(rowMet(row({ target: { kind: 'value_max', value: 12 } }))).toBe(true);
    expect(rowMet(row({ target: { kind: 'value_max', value: 11.9 } }))).toBe(false);
    expect(rowMet(row({ target: { kind: 'value_min', value: 13 } }))).toBe(false);
  });

  it('has no verdict without a target and keeps a verdict the result states itself', () => {
    expect(rowMet(row({ target: null }))).toBeUndefined();
    expect(rowMet(row({ met: true }))).toBe(true);
  });
});

describe('collecting results', () => {
  it('accepts a well-formed result and sorts by item then id', () => {
    const other = result({ id: 'canonical-json-ts', item: 1 });
    const collected = collectResults([file(result()), file(other, 'canonical-json-ts.json')]);
    expect(collected.invalid).toEqual([]);
    expect(collected.results.map((r) => r.id)).toEqual(['canonical-json-ts', 'store-dispatch-file']);
  });

  it('reports a file that is not JSON, breaks the schema, or is named after another id, without throwing', () => {
    const { results, invalid } = collectResults([
      file('{', 'broken.json'),
      file(JSON.stringify({ ...result(), rows: [{ ...row(), value: { median: 1, min: 2, max: 3 } }] })),
      file(result(), 'other-name.json'),
    ]);
    expect(results).toEqual([]);
    expect(invalid.map((i) => i.name)).toEqual(['broken.json', 'store-dispatch-file.json', 'other-name.json']);
    expect(invalid[0]?.problems).toEqual(['not JSON']);
    expect(invalid[1]?.problems.join()).toContain('min <= median <= max');
    expect(invalid[2]?.problems.join()).toContain('does not match the file name');
  });

  it('refuses a result that would publish a path or a credential', () => {
    const leaky = collectResults([file(result({ notes: ['written under /tmp/oduflow-bench-x'] })), file(result({ id: 'b', method: 'postgres://u:pw@db/x' }), 'b.json')]);
    expect(leaky.results).toEqual([]);
    expect(leaky.invalid.map((i) => i.problems.join())).toEqual(['contains an absolute path', 'contains a URL with credentials']);
  });

  it('refuses a ratio target on a row without a ratio', () => {
    const { invalid } = collectResults([file(result({ rows: [row({ floor: null, ratio: null })] }))]);
    expect(invalid[0]?.problems.join()).toContain('a ratio target needs a ratio');
  });
});

describe('the verdict', () => {
  it('passes a run whose targets are missed: a miss is a finding, not a failure', () => {
    const collected = collectResults([file(result()), file(result({ id: 'poll-sweep', item: 5 }), 'poll-sweep.json')]);
    const missing = missingResults(EXPECTED, 'default', collected.results);
    expect(missing).toEqual([]);
    expect(verdictOf(collected, missing, 'default')).toEqual({ exitCode: 0, failures: [] });
  });

  it('fails on a broken run and names every missing expected result with its producer', () => {
    const collected = collectResults([file(result({ ok: false }))]);
    const missing = missingResults(EXPECTED, 'full', collected.results);
    expect(missing.map((m) => m.id)).toEqual(['poll-sweep', 'lost-return-recovery']);
    const verdict = verdictOf(collected, missing, 'full');
    expect(verdict.exitCode).toBe(1);
    expect(verdict.failures.join('\n')).toContain('store-dispatch-file: the benchmark reported a broken run');
    expect(verdict.failures.join('\n')).toContain('poll-sweep (item 5, from master-runner (poll sweep)), lost-return-recovery (item 6, from test-harness (live))');
  });

  it('does not expect a full-only result in the default mode', () => {
    expect(missingResults(EXPECTED, 'default', []).map((m) => m.id)).toEqual(['store-dispatch-file', 'poll-sweep']);
  });
});

describe('BENCHMARKS.md', () => {
  const input = {
    mode: 'default' as const,
    results: [result(), result({ id: 'rates', item: 3, title: 'Rates | pipes', rows: [row({ label: 'a|b', unit: 'req/s', higher_is_better: true, target: { kind: 'ratio_min', value: 0.5 } })], notes: [] })],
    facts: [['CPU', 'Test CPU'], ['cores', '2']] as const,
    missing: [EXPECTED[2] as ExpectedBench],
    charts: new Map([['store-dispatch-file', 'docs/bench/store-dispatch-file.svg']]),
  };

  it('renders the same text for the same input', () => {
    expect(renderMarkdown(input)).toBe(renderMarkdown(input));
  });

  it('says it is generated, lists the facts, and puts every row in the summary with ✔ or ✘', () => {
    const text = renderMarkdown(input);
    expect(text).toContain('Generated by `npm run bench`');
    expect(text).toContain('| CPU | Test CPU |');
    expect(text).toContain(
      '| [Master store per dispatch (file store)](#store-dispatch-file) | dispatch, 3 records | 8 [7–9] ms | 12 [10–15] ms | 1.5× [1.2–1.9] | ≤ 1.25× | ✘ |',
    );
    expect(text).toContain('| [Rates \\| pipes](#rates) | a\\|b | 8 [7–9] req/s | 12 [10–15] req/s | 1.5× [1.2–1.9] | ≥ 0.5× | ✔ |');
    expect(text).toContain('- `lost-return-recovery` (item 6, written by test-harness (live); runs in mode full)');
  });

  it('gives each benchmark its method, floor, notes and chart', () => {
    const text = renderMarkdown(input);
    expect(text).toContain('**Method.** interleaved runs on ext4');
    expect(text).toContain('**Floor.** three bare atomic writes of the same sizes');
    expect(text).toContain('- the store writes five files per dispatch');
    expect(text).toContain('![Master store per dispatch (file store)](docs/bench/store-dispatch-file.svg)');
    expect(text).toContain('| a\\|b (higher is better) |');
  });
});
