#!/usr/bin/env node
/*
 * The aggregator of `npm run bench` (run by scripts/bench.sh after every
 * package's bench target): reads .test-results/bench/*.json, checks each
 * against the result contract (issue 12), renders BENCHMARKS.md at the repo
 * root with the machine facts and one SVG chart per benchmark under
 * docs/bench/, and exits 1 when a result is broken (ok: false), invalid, or
 * expected and missing. A missed target is a finding, reported with ✘, and
 * does not fail the run. The logic lives (unit-tested) in
 * @oduflow/test-harness/bench; this is the wiring.
 *
 * The mode (ODUFLOW_BENCH_MODE: default | full) decides which results are
 * expected. In smoke mode the files are checked and nothing is rewritten
 * (smoke numbers are not documentation).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchModeOf, chartSvg, collectMachineFacts, collectResults, missingResults, renderMarkdown, verdictOf } from '@oduflow/test-harness/bench';

/**
 * Every result a run must produce, by mode. Item numbers are issue 12's.
 * Ids written by other packages are listed here too, so a benchmark that
 * silently stopped writing its result fails the run with its name.
 */
const BOTH = ['default', 'full'];
const EXPECTED = [
  { id: 'canonical-json-ts', item: 1, producer: 'packages/protocol (canonical JSON, TypeScript)', modes: BOTH },
  { id: 'canonical-json-python', item: 1, producer: 'packages/minion-wrapper (bench/canonical_json_bench.py)', modes: BOTH },
  { id: 'minion-overhead', item: 2, producer: 'packages/test-harness (bench/live.ts, real Salt)', modes: BOTH },
  { id: 'store-dispatch-file', item: 3, producer: 'packages/master-runner (bench/store-dispatch.ts)', modes: BOTH },
  { id: 'store-dispatch-postgres', item: 3, producer: 'packages/master-runner (bench/store-dispatch.ts)', modes: BOTH },
  { id: 'file-store-scaling', item: 3, producer: 'packages/master-runner (bench/file-store-scaling.ts)', modes: BOTH },
  { id: 'receipt-store-writes', item: 3, producer: 'packages/receipt-store (bench/receipt-store-writes.ts)', modes: BOTH },
  { id: 'admission', item: 4, producer: 'apps/master (bench/admission.ts, autocannon)', modes: BOTH },
  { id: 'poll-sweep', item: 5, producer: 'packages/master-runner (bench/run-poll-sweep.mjs)', modes: BOTH },
  { id: 'lost-return-recovery', item: 6, producer: 'packages/test-harness (bench/live.ts, real Salt)', modes: BOTH },
  { id: 'rollout-checkpoints', item: 7, producer: 'packages/job-envelope (bench/rollout-checkpoints.ts)', modes: BOTH },
];

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const resultsDir = join(root, '.test-results', 'bench');
const mode = benchModeOf();

const files = existsSync(resultsDir)
  ? readdirSync(resultsDir)
      .filter((name) => name.endsWith('.json'))
      .sort()
      .map((name) => ({ name, text: readFileSync(join(resultsDir, name), 'utf8') }))
  : [];
const collected = collectResults(files);
const missing = missingResults(EXPECTED, mode, collected.results);

if (mode !== 'smoke') {
  const chartsDir = join(root, 'docs', 'bench');
  mkdirSync(chartsDir, { recursive: true });
  // The charts are regenerated with the page: one left by a benchmark not in this run would be stale.
  for (const name of readdirSync(chartsDir)) if (name.endsWith('.svg')) rmSync(join(chartsDir, name));
  const charts = new Map();
  for (const result of collected.results) {
    const svg = chartSvg(result);
    if (svg === undefined) continue;
    writeFileSync(join(chartsDir, `${result.id}.svg`), svg);
    charts.set(result.id, `docs/bench/${result.id}.svg`);
  }
  const facts = collectMachineFacts(root, tmpdir());
  const elapsed = Number(process.env.ODUFLOW_BENCH_ELAPSED_S);
  if (Number.isFinite(elapsed) && elapsed > 0) facts.push(['run time (install, build, benchmarks)', `${(elapsed / 60).toFixed(1)} min`]);
  writeFileSync(join(root, 'BENCHMARKS.md'), renderMarkdown({ mode, results: collected.results, facts, missing, charts }));
  console.log(`bench: BENCHMARKS.md and ${charts.size} chart(s) rewritten from ${collected.results.length} result(s)`);
}

const verdict = verdictOf(collected, missing, mode);
for (const failure of verdict.failures) console.error(`bench: ${failure}`);
process.exit(verdict.exitCode);
