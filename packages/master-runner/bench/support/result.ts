import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, writeBenchResult } from '../../../test-harness/src/bench/measure.js';
import { benchModeOf, benchResultProblems, reportLeaks, type BenchResult } from '../../../test-harness/src/bench/result.js';

/*
 * The poll-sweep and admission benchmarks' side of the bench contract
 * (issue 12). The contract itself — its schema, the mode, the summary of
 * runs, the leak scan and the checked write — is @oduflow/test-harness's
 * src/bench, imported by path (test-harness depends on this package, so
 * not by name); this file only knows where these scripts put their file.
 */

export { benchModeOf as benchMode, summarize as stats };
export type { BenchResult, BenchRow as ResultRow, Summary as Stats } from '../../../test-harness/src/bench/result.js';

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

/** Writes .test-results/bench/<id>.json at the repository root (or under ODUFLOW_BENCH_OUT: the smoke tests'), checked against the contract; returns its path. */
export function writeResult(result: BenchResult): string {
  return writeBenchResult(result, process.env['ODUFLOW_BENCH_OUT'] ?? join(repoRoot(), '.test-results', 'bench'));
}

/**
 * What is wrong with a smoke run's result (empty: nothing): the contract's
 * schema and leak scan, a run that did not end ok or measured nothing, and
 * any of `forbidden` — strings of the machine or the run that wrote it
 * (paths, hostnames, secrets) — anywhere in it.
 */
export function resultProblems(result: unknown, forbidden: readonly string[]): string[] {
  const problems = benchResultProblems(result);
  const r = (typeof result === 'object' && result !== null ? result : {}) as Record<string, unknown>;
  if (r['ok'] !== true) problems.push('ok is not true');
  if (!Array.isArray(r['rows']) || r['rows'].length === 0) problems.push('rows is not a non-empty array');
  const text = JSON.stringify(result);
  problems.push(...reportLeaks(text));
  if (forbidden.some((s) => s !== '' && text.includes(s))) problems.push('the result names something of the machine or the run (a path, a host or a secret)');
  return problems;
}
