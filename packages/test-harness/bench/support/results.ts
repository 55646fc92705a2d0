/*
 * The result file of issue 12's benchmark contract (the bench aggregator
 * reads every `.test-results/bench/<id>.json`): one object per benchmark,
 * medians with min and max over runs; no paths, hostnames, exception
 * messages or state data.
 */
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export type BenchMode = 'smoke' | 'default' | 'full';

export interface Stat {
  median: number;
  min: number;
  max: number;
}

export type Target = { kind: 'ratio_max' | 'ratio_min' | 'value_max' | 'value_min'; value: number } | null;

export interface Row {
  label: string;
  unit: string;
  value: Stat;
  floor: Stat | null;
  ratio: Stat | null;
  higher_is_better: boolean;
  runs: number;
  target: Target;
  met?: boolean;
}

export interface BenchResult {
  schema: 1;
  id: string;
  item: number;
  title: string;
  method: string;
  floor: string;
  mode: BenchMode;
  rows: Row[];
  chart: null;
  notes: string[];
  ok: boolean;
}

export function benchMode(): BenchMode {
  const mode = process.env['ODUFLOW_BENCH_MODE'] ?? 'default';
  if (mode !== 'smoke' && mode !== 'default' && mode !== 'full') throw new Error('ODUFLOW_BENCH_MODE must be smoke, default or full');
  return mode;
}

const round = (x: number): number => Number(x.toPrecision(4));

export function stat(values: readonly number[]): Stat {
  if (values.length === 0 || values.some((v) => !Number.isFinite(v))) throw new Error('bench: a statistic needs finite samples');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { median: round(median), min: round(sorted[0] as number), max: round(sorted[sorted.length - 1] as number) };
}

/** A row of a thing and its floor, measured run by run: the ratio is taken per run. */
export function ratioRow(label: string, unit: string, values: readonly number[], floors: readonly number[], target: Target): Row {
  const ratios = values.map((v, i) => v / (floors[i] as number));
  const row: Row = { label, unit, value: stat(values), floor: stat(floors), ratio: stat(ratios), higher_is_better: false, runs: values.length, target };
  if (target?.kind === 'ratio_max') row.met = stat(ratios).median <= target.value;
  return row;
}

/** A row with an absolute target (or none). */
export function valueRow(label: string, unit: string, values: readonly number[], target: Target, higherIsBetter = false): Row {
  const value = stat(values);
  const row: Row = { label, unit, value, floor: null, ratio: null, higher_is_better: higherIsBetter, runs: values.length, target };
  if (target?.kind === 'value_max') row.met = value.median <= target.value;
  if (target?.kind === 'value_min') row.met = value.median >= target.value;
  return row;
}

/** `<dir>/<id>.json`, written whole (temp + rename). */
export function writeResult(dir: string, result: BenchResult): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${result.id}.json`);
  writeFileSync(`${path}.tmp`, `${JSON.stringify(result, null, 2)}\n`);
  renameSync(`${path}.tmp`, path);
  return path;
}
