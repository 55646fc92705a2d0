import { rowMet } from './met.js';
import { BenchResultSchema, reportLeaks, type BenchMode, type BenchResult, type BenchRow, type Summary, type Target } from './result.js';
import { formatNumber } from './svg.js';

/*
 * The aggregator's logic, kept out of scripts/bench.mjs so it is unit
 * tested: read the run's result files, check them against the contract,
 * find what is missing, render BENCHMARKS.md, and decide the exit code.
 */

/** A benchmark the run must produce, in the modes listed. */
export interface ExpectedBench {
  readonly id: string;
  readonly item: number;
  /** Who writes it (a package's bench script), for the message when it is missing. */
  readonly producer: string;
  readonly modes: readonly BenchMode[];
}

export interface ResultFile {
  /** The file's base name, `<id>.json`. */
  readonly name: string;
  readonly text: string;
}

export interface Collected {
  readonly results: BenchResult[];
  /** Files that are not a valid result, with what is wrong (in words, never their content). */
  readonly invalid: { readonly name: string; readonly problems: string[] }[];
}

/** Parses and checks every result file; a broken one is reported, never thrown. Results come sorted by item, then id. */
export function collectResults(files: readonly ResultFile[]): Collected {
  const results: BenchResult[] = [];
  const invalid: { name: string; problems: string[] }[] = [];
  for (const file of files) {
    let value: unknown;
    try {
      value = JSON.parse(file.text);
    } catch {
      invalid.push({ name: file.name, problems: ['not JSON'] });
      continue;
    }
    const parsed = BenchResultSchema.safeParse(value);
    if (!parsed.success) {
      invalid.push({ name: file.name, problems: parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`) });
      continue;
    }
    const problems: string[] = [];
    if (`${parsed.data.id}.json` !== file.name) problems.push(`id "${parsed.data.id}" does not match the file name`);
    const leaks = reportLeaks(file.text);
    if (leaks.length > 0) problems.push(`contains ${leaks.join(', ')}`);
    if (results.some((r) => r.id === parsed.data.id)) problems.push('duplicate id');
    if (problems.length > 0) invalid.push({ name: file.name, problems });
    else results.push(parsed.data);
  }
  results.sort((a, b) => a.item - b.item || a.id.localeCompare(b.id));
  return { results, invalid };
}

/** The expected benchmarks of `mode` that produced no (valid) result. */
export function missingResults(expected: readonly ExpectedBench[], mode: BenchMode, results: readonly BenchResult[]): ExpectedBench[] {
  return expected.filter((e) => e.modes.includes(mode) && !results.some((r) => r.id === e.id));
}

export interface Verdict {
  readonly exitCode: 0 | 1;
  /** Why the run failed, one line each (empty when it passed). */
  readonly failures: string[];
}

/** The run fails on a broken result (ok: false), an invalid file or a missing expected result; a missed target does not fail it. */
export function verdictOf(collected: Collected, missing: readonly ExpectedBench[], mode: BenchMode): Verdict {
  const failures: string[] = [];
  for (const r of collected.results) if (!r.ok) failures.push(`${r.id}: the benchmark reported a broken run (ok: false)`);
  for (const f of collected.invalid) failures.push(`${f.name}: not a valid result (${f.problems.join('; ')})`);
  for (const r of collected.results) if (r.mode !== mode) failures.push(`${r.id}: ran in mode ${r.mode}, not ${mode}`);
  if (missing.length > 0) {
    failures.push(
      `missing ${missing.length} expected result(s) of mode ${mode}: ${missing.map((m) => `${m.id} (item ${m.item}, from ${m.producer})`).join(', ')}`,
    );
  }
  return { exitCode: failures.length > 0 ? 1 : 0, failures };
}

const range = (s: Summary): string => `${formatNumber(s.median)} [${formatNumber(s.min)}–${formatNumber(s.max)}]`;
const withUnit = (s: Summary | null, unit: string): string => (s === null ? '—' : `${range(s)} ${unit}`);
const ratioText = (s: Summary | null): string => (s === null ? '—' : `${formatNumber(s.median)}× [${formatNumber(s.min)}–${formatNumber(s.max)}]`);
/** Markdown table cells must not contain a bare `|` or a line break. */
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

export function targetText(target: Target | null, unit: string): string {
  if (target === null) return 'reported';
  switch (target.kind) {
    case 'ratio_max':
      return `≤ ${formatNumber(target.value)}×`;
    case 'ratio_min':
      return `≥ ${formatNumber(target.value)}×`;
    case 'value_max':
      return `≤ ${formatNumber(target.value)} ${unit}`;
    case 'value_min':
      return `≥ ${formatNumber(target.value)} ${unit}`;
  }
}

const metText = (row: BenchRow): string => {
  const met = rowMet(row);
  return met === undefined ? '—' : met ? '✔' : '✘';
};

export interface RenderInput {
  readonly mode: BenchMode;
  readonly results: readonly BenchResult[];
  /** Machine facts as label → value, in display order. */
  readonly facts: readonly (readonly [string, string])[];
  readonly missing: readonly ExpectedBench[];
  /** The chart of each result that has one, as a path relative to the repo root (docs/bench/<id>.svg). */
  readonly charts: ReadonlyMap<string, string>;
}

const INTRO = [
  'Every number here is a measurement beside its floor: the least work the',
  'same guarantee forces (a bare write + fsync + rename + directory fsync for',
  'a durable file, a bare single-row commit for PostgreSQL, the platform’s own',
  'JSON parser and SHA-256 for canonical JSON), measured in the same process,',
  'in the same run, interleaved, several times. The targets are ratios to',
  'those floors, not absolute times: on a shared 2-core machine absolute',
  'times move by 30 % or more between runs, while a ratio measured side by',
  'side moves far less. Each cell is the median of the runs with their min and',
  'max; a ratio is computed per run (value ÷ floor, or rate ÷ floor rate when',
  'higher is better) and then summarized.',
];

/** BENCHMARKS.md: intro, machine facts, summary table, then one section per benchmark. */
export function renderMarkdown(input: RenderInput): string {
  const out: string[] = [
    '# Benchmarks',
    '',
    '<!-- Generated by `npm run bench` (scripts/bench.mjs) from .test-results/bench/*.json. Do not edit by hand: run the command again. -->',
    '',
    `> Generated by \`npm run bench${input.mode === 'full' ? ' -- --full' : ''}\` (mode \`${input.mode}\`), which rewrites this file and the charts in \`docs/bench/\`. How the benchmarks work: [docs/benchmarks.md](docs/benchmarks.md).`,
    '',
    ...INTRO,
    '',
    '## Machine',
    '',
    '| fact | value |',
    '|---|---|',
    ...input.facts.map(([label, value]) => `| ${cell(label)} | ${cell(value)} |`),
    '',
    '## Summary',
    '',
    '| benchmark | row | floor | median [min–max] | ratio | target | met |',
    '|---|---|---:|---:|---:|---|:---:|',
  ];
  for (const result of input.results) {
    for (const row of result.rows) {
      out.push(
        `| [${cell(result.title)}](#${result.id}) | ${cell(row.label)} | ${withUnit(row.floor, cell(row.unit))} | ${withUnit(row.value, cell(row.unit))} | ${ratioText(row.ratio)} | ${targetText(row.target, cell(row.unit))} | ${metText(row)} |`,
      );
    }
    if (result.rows.length === 0) out.push(`| [${cell(result.title)}](#${result.id}) | (no rows) | — | — | — | — | — |`);
  }
  if (input.missing.length > 0) {
    out.push('', 'Not in this run:', '');
    for (const m of input.missing) out.push(`- \`${m.id}\` (item ${m.item}, written by ${m.producer}; runs in mode ${m.modes.join(', ')})`);
  }
  for (const result of input.results) {
    out.push(
      '',
      `<a id="${result.id}"></a>`,
      '',
      `## ${result.title}`,
      '',
      `Item ${result.item} of issue 12 · id \`${result.id}\` · mode \`${result.mode}\`${result.ok ? '' : ' · **broken run (ok: false)**'}`,
      '',
      `**Method.** ${result.method}`,
      '',
      `**Floor.** ${result.floor}`,
      '',
      '| row | value | floor | ratio | target | met | runs |',
      '|---|---:|---:|---:|---|:---:|---:|',
      ...result.rows.map(
        (row) =>
          `| ${cell(row.label)}${row.higher_is_better ? ' (higher is better)' : ''} | ${withUnit(row.value, cell(row.unit))} | ${withUnit(row.floor, cell(row.unit))} | ${ratioText(row.ratio)} | ${targetText(row.target, cell(row.unit))} | ${metText(row)} | ${row.runs} |`,
      ),
    );
    if (result.notes.length > 0) out.push('', '**Notes.**', '', ...result.notes.map((note) => `- ${note.replace(/\s*\n\s*/g, ' ')}`));
    const chart = input.charts.get(result.id);
    if (chart !== undefined) out.push('', `![${result.title}](${chart})`);
  }
  return `${out.join('\n')}\n`;
}
