/*
 * Issue 12 item 1 (TypeScript): canonicalJson, parseCanonicalJson and
 * stateDigest on realistic custom high data of 1, 16 and 60 KiB, each against
 * its floor, the platform's native work on the same text in the same
 * process, interleaved run by run:
 *
 * - canonicalJson(value)      vs JSON.stringify(value)
 * - parseCanonicalJson(text)  vs JSON.parse(text) + JSON.stringify(value)
 * - stateDigest(text)         vs JSON.parse(text) + JSON.stringify(value) + SHA-256(text)
 *
 * `value` is the parsed text. The inputs are bench/high-data-inputs.json
 * (bench/high-data.ts), which the Python bench reads too. Writes
 * .test-results/bench/canonical-json-ts.json (docs/benchmarks.md; the result
 * contract of issue 12), or into ODUFLOW_BENCH_OUT_DIR when set.
 * ODUFLOW_BENCH_MODE: smoke (1 run, a few calls), default, full (more runs).
 * Run: `npm run bench` in this package (bench/run-canonical-json.mjs bundles
 * and runs this file).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canonicalJson, parseCanonicalJson, stateDigest } from '../src/index.js';
import { type HighDataInput, highDataInputsFile } from './high-data.js';

type Mode = 'smoke' | 'default' | 'full';
const MODE: Mode = ((): Mode => {
  const mode = process.env['ODUFLOW_BENCH_MODE'] ?? 'default';
  if (mode === 'smoke' || mode === 'default' || mode === 'full') return mode;
  throw new Error('ODUFLOW_BENCH_MODE must be smoke, default or full');
})();
const RUNS = { smoke: 1, default: 9, full: 21 }[MODE];
/** CPU time per side and run, split into CHUNKS chunks that alternate with the other side's. */
const BATCH_MS = { smoke: 2, default: 40, full: 80 }[MODE];
const CHUNKS = { smoke: 2, default: 8, full: 8 }[MODE];
const TARGET_RATIO = 2;

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const inputsPath = join(packageDir, 'bench', 'high-data-inputs.json');
const outDir = process.env['ODUFLOW_BENCH_OUT_DIR'] ?? join(packageDir, '..', '..', '.test-results', 'bench');

interface Stats {
  median: number;
  min: number;
  max: number;
}
interface Row {
  label: string;
  unit: 'ms';
  value: Stats;
  floor: Stats;
  ratio: Stats;
  higher_is_better: false;
  runs: number;
  target: { kind: 'ratio_max'; value: number } | null;
  met?: boolean;
}

/** Results go here so the engine cannot drop a call as dead code. */
let sink: unknown;

const gc = (globalThis as { gc?: () => void }).gc;

function stats(samples: readonly number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  const round = (n: number): number => Number(n.toPrecision(4));
  return { median: round(median), min: round(sorted[0] as number), max: round(sorted[sorted.length - 1] as number) };
}

/** CPU time of this process (user + system), ms: what the code costs, not how often the shared machine let it run. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Calls per chunk so that a chunk lasts about BATCH_MS / CHUNKS (at least one call). */
function calibrate(fn: () => unknown): number {
  const chunkMs = BATCH_MS / CHUNKS;
  let calls = 1;
  for (;;) {
    const start = cpuMs();
    for (let index = 0; index < calls; index += 1) sink = fn();
    const ms = cpuMs() - start;
    if (ms >= chunkMs / 4 || calls >= 1 << 20) return Math.max(1, Math.ceil((calls * chunkMs) / Math.max(ms, 1e-3)));
    calls *= 2;
  }
}

/** CPU ms of `calls` calls. */
function chunk(fn: () => unknown, calls: number): number {
  const start = cpuMs();
  for (let index = 0; index < calls; index += 1) sink = fn();
  return cpuMs() - start;
}

/**
 * One run of one row: CHUNKS pairs of (call, floor) chunks, the order
 * alternating pair by pair, so both sides see the same moments of the
 * machine; returns the mean CPU ms per call of each side.
 */
function pairedRun(entry: Case, valueCalls: number, floorCalls: number): { value: number; floor: number } {
  let value = 0;
  let floor = 0;
  for (let pair = 0; pair < CHUNKS; pair += 1) {
    if (pair % 2 === 0) {
      value += chunk(entry.value, valueCalls);
      floor += chunk(entry.floor, floorCalls);
    } else {
      floor += chunk(entry.floor, floorCalls);
      value += chunk(entry.value, valueCalls);
    }
  }
  return { value: value / (valueCalls * CHUNKS), floor: floor / (floorCalls * CHUNKS) };
}

interface Case {
  label: string;
  value: () => unknown;
  floor: () => unknown;
  target: Row['target'];
}

function cases(input: HighDataInput): Case[] {
  const text = input.state_data_json;
  const value: unknown = JSON.parse(text);
  const sha256 = (): string => createHash('sha256').update(text, 'utf8').digest('hex');
  return [
    { label: `canonicalJson, ${input.label}`, value: () => canonicalJson(value), floor: () => JSON.stringify(value), target: null },
    {
      label: `parseCanonicalJson, ${input.label}`,
      value: () => parseCanonicalJson(text),
      floor: () => JSON.stringify(JSON.parse(text)),
      target: null,
    },
    {
      label: `stateDigest, ${input.label}`,
      value: () => stateDigest(text),
      floor: () => {
        sink = JSON.stringify(JSON.parse(text));
        return sha256();
      },
      target: { kind: 'ratio_max', value: TARGET_RATIO },
    },
  ];
}

function readInputs(): HighDataInput[] {
  const file = JSON.parse(readFileSync(inputsPath, 'utf8')) as { inputs: HighDataInput[] };
  for (const input of file.inputs) {
    const text = input.state_data_json;
    // The inputs are what they claim to be, and valid high data (so every call below takes its success path).
    if (createHash('sha256').update(text, 'utf8').digest('hex') !== input.sha256) throw new Error(`input ${input.label}: sha256 differs`);
    if (stateDigest(text) !== input.sha256) throw new Error(`input ${input.label}: stateDigest differs`);
    if (canonicalJson(parseCanonicalJson(text)) !== text) throw new Error(`input ${input.label}: not canonical`);
  }
  return file.inputs;
}

function measure(inputs: readonly HighDataInput[]): Row[] {
  const all = inputs.flatMap(cases);
  const plan = all.map((entry) => ({ entry, valueCalls: calibrate(entry.value), floorCalls: calibrate(entry.floor) }));
  const samples = plan.map(() => ({ value: [] as number[], floor: [] as number[], ratio: [] as number[] }));
  // One discarded run first (smoke mode aside): every path optimized before anything counts.
  for (let run = RUNS > 1 ? -1 : 0; run < RUNS; run += 1) {
    gc?.();
    plan.forEach(({ entry, valueCalls, floorCalls }, index) => {
      const { value, floor } = pairedRun(entry, valueCalls, floorCalls);
      if (run < 0) return;
      const sample = samples[index];
      if (sample === undefined) throw new Error('no sample slot');
      sample.value.push(value);
      sample.floor.push(floor);
      sample.ratio.push(value / floor);
    });
  }
  return plan.map(({ entry }, index) => {
    const sample = samples[index];
    if (sample === undefined) throw new Error('no sample slot');
    const ratio = stats(sample.ratio);
    const row: Row = {
      label: entry.label,
      unit: 'ms',
      value: stats(sample.value),
      floor: stats(sample.floor),
      ratio,
      higher_is_better: false,
      runs: RUNS,
      target: entry.target,
    };
    if (entry.target !== null) row.met = ratio.median <= entry.target.value;
    return row;
  });
}

function write(result: object): void {
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'canonical-json-ts.json'), `${JSON.stringify(result, null, 2)}\n`);
}

function main(): void {
  if (process.argv.includes('--write-inputs')) {
    writeFileSync(inputsPath, `${JSON.stringify(highDataInputsFile(), null, 2)}\n`);
    return;
  }
  const base = {
    schema: 1,
    id: 'canonical-json-ts',
    item: 1,
    title: 'Canonical JSON, validation and digest (TypeScript)',
    method: `@oduflow/protocol's canonicalJson, parseCanonicalJson and stateDigest on realistic custom high data of 1, 16 and 60 KiB (file.managed with config bodies, pkg.installed, service with watch, user.present, cmd.run, non-ASCII; the seeded texts of high-data-inputs.json, which the Python bench reads too), in one Node process. Per run and row, the call and its floor alternate in ${CHUNKS} pairs of chunks (which goes first alternates pair by pair), about ${BATCH_MS} ms of calls per side; the time is CPU time of the process (user + system, process.cpuUsage), so moments when the shared machine ran something else count for neither side. ${RUNS} runs after a discarded warm-up run, GC between runs; the ratio is value / floor per run. CPU only, no I/O.`,
    floor:
      'The native work on the same text in the same run: JSON.stringify(value) for canonicalJson, JSON.parse(text) + JSON.stringify for parseCanonicalJson, and those plus createHash("sha256") of the text for stateDigest.',
    mode: MODE,
    chart: null,
  };
  try {
    const rows = measure(readInputs());
    const missed = rows.filter((row) => row.met === false).map((row) => row.label);
    const notes = [
      'Only stateDigest carries a target (≤ 2× its floor); canonicalJson and parseCanonicalJson are reported.',
      ...(missed.length > 0 ? [`Target missed: ${missed.join('; ')}.`] : []),
    ];
    write({ ...base, rows, notes, ok: true });
    for (const row of rows) {
      process.stdout.write(`${row.label.padEnd(34)} ${row.value.median.toFixed(4)} ms  floor ${row.floor.median.toFixed(4)} ms  ratio ${row.ratio.median.toFixed(2)} (${row.ratio.min.toFixed(2)}–${row.ratio.max.toFixed(2)})\n`);
    }
  } catch (error) {
    write({ ...base, rows: [], notes: ['the run threw before it measured every row'], ok: false });
    throw error;
  }
  if (typeof sink === 'symbol') process.stdout.write('');
}

main();
