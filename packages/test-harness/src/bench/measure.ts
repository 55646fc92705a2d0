import { closeSync, constants, fsyncSync, mkdirSync, openSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { BenchResultSchema, reportLeaks, type BenchResult, type BenchRow, type Summary, type Target } from './result.js';

/*
 * What every benchmark of issue 12 shares: the summary of several runs, the
 * row that puts a measurement beside its floor, the bare atomic write that is
 * the floor of every durable file write, and writing the result file.
 */

/** Median, min and max of the runs (the median of an even count is the mean of the middle two). */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('summarize: no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  return { median, min: sorted[0] as number, max: sorted[sorted.length - 1] as number };
}

export interface RowInput {
  readonly label: string;
  readonly unit: string;
  /** One value per run. */
  readonly values: readonly number[];
  /** One floor per run, measured in the same run as the value of the same index; omitted when the target is absolute. */
  readonly floors?: readonly number[];
  readonly higherIsBetter?: boolean;
  readonly target: Target | null;
}

/** A contract row: value, floor and the per-run ratio value/floor, each as median [min, max]. */
export function rowOf(input: RowInput): BenchRow {
  const { floors } = input;
  if (floors !== undefined && floors.length !== input.values.length) throw new Error(`${input.label}: ${input.values.length} values but ${floors.length} floors`);
  return {
    label: input.label,
    unit: input.unit,
    value: summarize(input.values),
    floor: floors === undefined ? null : summarize(floors),
    ratio: floors === undefined ? null : summarize(input.values.map((value, index) => value / (floors[index] as number))),
    higher_is_better: input.higherIsBetter ?? false,
    runs: input.values.length,
    target: input.target,
  };
}

/**
 * Runs `measure` then `floor` (or the other way round, alternating by run, so
 * neither always gets the warmer cache or the quieter disk) `runs` times;
 * returns each one's samples in run order.
 */
export async function interleaved(runs: number, measure: () => Promise<number>, floor: () => Promise<number>): Promise<{ values: number[]; floors: number[] }> {
  const values: number[] = [];
  const floors: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    if (run % 2 === 0) {
      values.push(await measure());
      floors.push(await floor());
    } else {
      floors.push(await floor());
      values.push(await measure());
    }
  }
  return { values, floors };
}

/** Milliseconds `work` takes (monotonic clock). */
export async function timeMs(work: () => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/**
 * The floor of one durable file write: a new temp file, write, fsync,
 * rename over `name`, fsync of the directory. Nothing less makes a file's
 * new content survive a power cut on Linux, so no store can do a write in
 * less; synchronous calls, no locking, no checks.
 */
export function bareAtomicWrite(dir: string, name: string, bytes: Uint8Array): void {
  const temp = join(dir, `.${name}.tmp`);
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
  try {
    writeSync(fd, bytes);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, join(dir, name));
  const dirFd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
}

/**
 * Writes `result` to `<dir>/<id>.json` after checking it against the
 * contract and for leaks (a benchmark that would publish a path or a
 * secret fails loudly instead); returns the file's path.
 */
export function writeBenchResult(result: BenchResult, dir: string): string {
  const checked = BenchResultSchema.parse(result);
  const text = `${JSON.stringify(checked, null, 2)}\n`;
  const leaks = reportLeaks(text);
  if (leaks.length > 0) throw new Error(`bench result ${result.id} would publish ${leaks.join(', ')}`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${result.id}.json`);
  writeFileSync(path, text);
  return path;
}

/** Who a benchmark module is: what the runner reports as broken (ok: false) when its run throws. */
export interface BenchIdentity {
  readonly id: string;
  readonly item: number;
  readonly title: string;
}

/**
 * The shape of a benchmark module run by scripts/run-bench.mjs: its
 * identities and a `run` that returns one result per identity. A smoke test
 * imports the same module and calls `run('smoke')`.
 */
export interface BenchModule {
  readonly BENCHES: readonly BenchIdentity[];
  run(mode: BenchResult['mode']): Promise<BenchResult[]>;
}

/** The result of a run that threw: nothing measured; the error stays on the console, never in the report. */
export function brokenResult(identity: BenchIdentity, mode: BenchResult['mode']): BenchResult {
  return {
    schema: 1,
    ...identity,
    method: 'Not measured: the benchmark threw before it produced its result (the error is on the console of the run, not in this report).',
    floor: 'Not measured.',
    mode,
    rows: [],
    chart: null,
    notes: ['Broken run: see the console output of npm run bench.'],
    ok: false,
  };
}

/**
 * What is wrong with the results of a benchmark module's run, in words
 * (empty when nothing is): one well-formed result per identity, in the mode
 * asked, not broken, with at least one row, every row's numbers finite and a
 * floor wherever a ratio is, and nothing a report must not carry. What the
 * smoke tests assert; never a timing.
 */
export function resultProblems(results: readonly BenchResult[], identities: readonly BenchIdentity[], mode: BenchResult['mode']): string[] {
  const problems: string[] = [];
  if (results.length !== identities.length) problems.push(`${results.length} results for ${identities.length} benchmarks`);
  for (const identity of identities) {
    const result = results.find((r) => r.id === identity.id);
    if (result === undefined) {
      problems.push(`${identity.id}: no result`);
      continue;
    }
    const parsed = BenchResultSchema.safeParse(result);
    if (!parsed.success) problems.push(...parsed.error.issues.map((issue) => `${identity.id}: ${issue.path.join('.')}: ${issue.message}`));
    if (result.item !== identity.item || result.title !== identity.title) problems.push(`${identity.id}: item or title differs from its identity`);
    if (result.mode !== mode) problems.push(`${identity.id}: mode ${result.mode}, not ${mode}`);
    if (!result.ok) problems.push(`${identity.id}: ok is false`);
    if (result.rows.length === 0) problems.push(`${identity.id}: no rows`);
    for (const row of result.rows) {
      if ((row.ratio === null) !== (row.floor === null)) problems.push(`${identity.id}: "${row.label}" has a ratio without a floor or a floor without a ratio`);
    }
    const leaks = reportLeaks(JSON.stringify(result));
    if (leaks.length > 0) problems.push(`${identity.id}: contains ${leaks.join(', ')}`);
  }
  return problems;
}
