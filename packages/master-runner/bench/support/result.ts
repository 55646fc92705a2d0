import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * The bench-contract result file (issue 12): one JSON file per benchmark
 * under <repo>/.test-results/bench/<id>.json, which the aggregator
 * (scripts/bench.mjs) turns into BENCHMARKS.md and a chart.
 */

export type BenchMode = 'smoke' | 'default' | 'full';

export function benchMode(): BenchMode {
  const mode = process.env['ODUFLOW_BENCH_MODE'] ?? 'default';
  if (mode !== 'smoke' && mode !== 'default' && mode !== 'full') throw new Error('ODUFLOW_BENCH_MODE is smoke, default or full');
  return mode;
}

export interface Stats {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export function stats(values: readonly number[]): Stats {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length === 0 ? Number.NaN : sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { median, min: sorted[0] ?? Number.NaN, max: sorted[sorted.length - 1] ?? Number.NaN };
}

export interface ResultRow {
  readonly label: string;
  readonly unit: string;
  readonly value: Stats;
  readonly floor: Stats | null;
  readonly ratio: Stats | null;
  readonly higher_is_better: boolean;
  readonly runs: number;
  readonly target: { readonly kind: 'ratio_max' | 'ratio_min' | 'value_max' | 'value_min'; readonly value: number } | null;
}

export interface BenchResult {
  readonly schema: 1;
  readonly id: string;
  readonly item: number;
  readonly title: string;
  readonly method: string;
  readonly floor: string;
  readonly mode: BenchMode;
  readonly rows: readonly ResultRow[];
  readonly chart: {
    readonly kind: 'lines';
    readonly x_label: string;
    readonly y_label: string;
    readonly series: readonly { readonly name: string; readonly points: readonly (readonly [number, number])[] }[];
    readonly target_line?: number;
  } | null;
  readonly notes: readonly string[];
  readonly ok: boolean;
}

/** The repository root: the nearest parent holding nx.json (this file may run bundled from build/). */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'nx.json'))) {
    const parent = resolve(dir, '..');
    if (parent === dir) throw new Error('no nx.json above the bench');
    dir = parent;
  }
  return dir;
}

/** Writes .test-results/bench/<id>.json at the repository root (or under ODUFLOW_BENCH_OUT: the smoke tests'); returns its path. */
export function writeResult(id: string, result: BenchResult): string {
  const dir = process.env['ODUFLOW_BENCH_OUT'] ?? join(repoRoot(), '.test-results', 'bench');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${id}.json`);
  writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
  return path;
}

const STAT_KEYS = ['median', 'min', 'max'] as const;
const TARGET_KINDS = new Set(['ratio_max', 'ratio_min', 'value_max', 'value_min']);

function isStats(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const fields = value as Record<string, unknown>;
  return STAT_KEYS.every((k) => typeof fields[k] === 'number' && Number.isFinite(fields[k]));
}

/**
 * What is wrong with a result file's content against the bench contract
 * (empty: nothing). `forbidden` are strings that must not appear anywhere in
 * it (paths, hostnames, secrets of the run that wrote it).
 */
export function resultProblems(result: unknown, forbidden: readonly string[]): string[] {
  const problems: string[] = [];
  if (typeof result !== 'object' || result === null) return ['not a JSON object'];
  const r = result as Record<string, unknown>;
  if (r['schema'] !== 1) problems.push('schema is not 1');
  for (const key of ['id', 'title', 'method', 'floor'] as const) if (typeof r[key] !== 'string' || r[key] === '') problems.push(`${key} is not a non-empty string`);
  if (typeof r['id'] === 'string' && !/^[a-z0-9]+(-[a-z0-9]+)*$/.test(r['id'])) problems.push('id is not kebab-case');
  if (!Number.isInteger(r['item']) || (r['item'] as number) < 1 || (r['item'] as number) > 7) problems.push('item is not 1..7');
  if (!['smoke', 'default', 'full'].includes(r['mode'] as string)) problems.push('mode is not smoke, default or full');
  if (r['ok'] !== true) problems.push('ok is not true');
  const rows = r['rows'];
  if (!Array.isArray(rows) || rows.length === 0) problems.push('rows is not a non-empty array');
  for (const [i, row] of (Array.isArray(rows) ? rows : []).entries()) {
    const f = (typeof row === 'object' && row !== null ? row : {}) as Record<string, unknown>;
    if (typeof f['label'] !== 'string' || typeof f['unit'] !== 'string') problems.push(`row ${i}: label or unit missing`);
    if (!isStats(f['value'])) problems.push(`row ${i}: value is not finite median/min/max`);
    if (f['floor'] !== null && !isStats(f['floor'])) problems.push(`row ${i}: floor is neither null nor finite stats`);
    if (f['ratio'] !== null && !isStats(f['ratio'])) problems.push(`row ${i}: ratio is neither null nor finite stats`);
    if (typeof f['higher_is_better'] !== 'boolean') problems.push(`row ${i}: higher_is_better is not a boolean`);
    if (!Number.isInteger(f['runs']) || (f['runs'] as number) < 1) problems.push(`row ${i}: runs is not a positive integer`);
    const target = f['target'] as Record<string, unknown> | null | undefined;
    if (target !== null && (typeof target !== 'object' || !TARGET_KINDS.has(target['kind'] as string) || !Number.isFinite(target['value']))) {
      problems.push(`row ${i}: target is neither null nor {kind, value}`);
    }
  }
  const chart = r['chart'] as Record<string, unknown> | null | undefined;
  if (chart !== null) {
    const series = chart?.['series'];
    if (chart?.['kind'] !== 'lines' || !Array.isArray(series)) problems.push('chart is neither null nor a lines chart');
    for (const s of Array.isArray(series) ? (series as Record<string, unknown>[]) : []) {
      const points = s['points'];
      if (typeof s['name'] !== 'string' || !Array.isArray(points) || !points.every((p) => Array.isArray(p) && p.length === 2 && p.every(Number.isFinite))) {
        problems.push('a chart series is not a name with finite [x, y] points');
      }
    }
  }
  if (!Array.isArray(r['notes']) || !(r['notes'] as unknown[]).every((n) => typeof n === 'string')) problems.push('notes is not an array of strings');
  const text = JSON.stringify(result);
  for (const s of forbidden) if (s !== '' && text.includes(s)) problems.push('the result names something of the machine or the run (a path, a host or a secret)');
  return problems;
}
