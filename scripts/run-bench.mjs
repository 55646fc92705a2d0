#!/usr/bin/env node
/*
 * Runs one benchmark module of a package and writes its result file(s) to
 * <repo>/.test-results/bench/<id>.json (the contract of issue 12, checked by
 * scripts/bench.mjs). Usage, from the package directory (its `bench` script), one or more modules:
 *
 *   node ../../scripts/run-bench.mjs bench/<name>.ts [bench/<other>.ts ...]
 *
 * Node 20 cannot run TypeScript and our packages import each other's built
 * dist, so the module is bundled with esbuild (workspace and npm packages
 * stay external imports) into the package's build/ directory and imported.
 * A module exports BENCHES (its ids) and run(mode) (see BenchModule in
 * @oduflow/test-harness/bench). When run() throws, each of its ids gets an
 * `ok: false` result so the aggregator reports the broken run, and the
 * error goes to stderr only: a report never carries an exception message.
 * ODUFLOW_BENCH_MODE (smoke | default | full) picks the sizes;
 * ODUFLOW_BENCH_RESULTS_DIR replaces the results directory (the smoke tests
 * write to a temp dir, never over a real run's results).
 */
import { buildSync } from 'esbuild';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchModeOf, brokenResult, writeBenchResult } from '@oduflow/test-harness/bench';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const sources = process.argv.slice(2);
if (sources.length === 0) {
  console.error('usage: node scripts/run-bench.mjs <bench module .ts>...');
  process.exit(2);
}
const mode = benchModeOf();
const packageDir = process.cwd();
const resultsDir = process.env.ODUFLOW_BENCH_RESULTS_DIR ?? join(root, '.test-results', 'bench');

// One module after another (never at once: they share two cores and one disk); one that throws does not stop the next.
for (const source of sources) {
  const outfile = join(packageDir, 'build', 'bench', `${basename(source, '.ts')}.mjs`);
  buildSync({ entryPoints: [resolve(packageDir, source)], bundle: true, packages: 'external', platform: 'node', format: 'esm', target: 'node20', outfile, logLevel: 'error' });
  const module = await import(pathToFileURL(outfile).href);
  const started = Date.now();
  try {
    const results = await module.run(mode);
    for (const result of results) console.log(`bench: wrote ${writeBenchResult(result, resultsDir)}`);
    console.log(`bench: ${source} (${mode}) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } catch (error) {
    console.error(`bench: ${source} threw; its results are marked broken (ok: false)`);
    console.error(error);
    for (const identity of module.BENCHES) writeBenchResult(brokenResult(identity, mode), resultsDir);
    process.exitCode = 1;
  }
}
