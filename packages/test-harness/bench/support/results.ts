/*
 * The live benchmark's rows, on the bench contract of issue 12
 * (src/bench: the schema, the mode, the summary of runs and the checked
 * write have their one owner there). What is particular here: numbers
 * rounded to 4 significant digits, as the notes quote them.
 */
import { rowOf, summarize, writeBenchResult } from '../../src/bench/measure.js';
import type { BenchResult, BenchRow, Summary, Target } from '../../src/bench/result.js';

export { benchModeOf as benchMode } from '../../src/bench/result.js';
export type { BenchMode, BenchResult, BenchRow as Row } from '../../src/bench/result.js';

const round = (x: number): number => Number(x.toPrecision(4));
const rounded = (s: Summary): Summary => ({ median: round(s.median), min: round(s.min), max: round(s.max) });
const roundedOrNull = (s: Summary | null): Summary | null => (s === null ? null : rounded(s));

function finite(values: readonly number[]): readonly number[] {
  if (values.length === 0 || values.some((v) => !Number.isFinite(v))) throw new Error('bench: a statistic needs finite samples');
  return values;
}

/** Median, min and max of finite samples, rounded. */
export function stat(values: readonly number[]): Summary {
  return rounded(summarize(finite(values)));
}

function roundedRow(row: BenchRow): BenchRow {
  return { ...row, value: rounded(row.value), floor: roundedOrNull(row.floor), ratio: roundedOrNull(row.ratio) };
}

/** A row of a thing and its floor, measured run by run: the ratio is taken per run. */
export function ratioRow(label: string, unit: string, values: readonly number[], floors: readonly number[], target: Target | null): BenchRow {
  return roundedRow(rowOf({ label, unit, values: finite(values), floors: finite(floors), target }));
}

/** A row with an absolute target (or none). */
export function valueRow(label: string, unit: string, values: readonly number[], target: Target | null, higherIsBetter = false): BenchRow {
  return roundedRow(rowOf({ label, unit, values: finite(values), target, higherIsBetter }));
}

/** `<dir>/<id>.json`, checked against the contract and for leaks. */
export function writeResult(dir: string, result: BenchResult): string {
  return writeBenchResult(result, dir);
}
