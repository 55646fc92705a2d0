import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchResult } from './result.js';

/** The repository root (this file is packages/test-harness/src/bench/smoke.ts). */
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');

export interface SmokeRun {
  /** The runner's exit status. */
  readonly status: number | null;
  /** The result files it wrote, by name, as parsed JSON (unchecked: that is the test's job). */
  readonly files: ReadonlyMap<string, unknown>;
  /** Its stdout and stderr, for a failing test's message. */
  readonly output: string;
}

/**
 * Runs a benchmark module the way its package's `bench` script does
 * (scripts/run-bench.mjs, from the package directory) with
 * ODUFLOW_BENCH_MODE=smoke, writing to a temp directory instead of the
 * run's results; returns what it wrote.
 */
export function runBenchSmoke(packageDir: string, source: string, timeoutMs = 120_000): SmokeRun {
  const out = mkdtempSync(join(tmpdir(), 'oduflow-bench-smoke-'));
  try {
    const run = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'run-bench.mjs'), source], {
      cwd: packageDir,
      env: { ...process.env, ODUFLOW_BENCH_MODE: 'smoke', ODUFLOW_BENCH_RESULTS_DIR: out },
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    const files = new Map<string, unknown>();
    for (const name of readdirSync(out)) files.set(name, JSON.parse(readFileSync(join(out, name), 'utf8')) as unknown);
    return { status: run.status, files, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** The results of a smoke run, for resultProblems (an entry that is not an object is passed on as is, to fail there). */
export const smokeResults = (run: SmokeRun): BenchResult[] => [...run.files.values()] as BenchResult[];
