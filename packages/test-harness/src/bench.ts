// @oduflow/test-harness/bench: the benchmark result contract of issue 12 and the aggregator's logic (scripts/bench.mjs).
export {
  BENCH_MODES,
  BenchResultSchema,
  TARGET_KINDS,
  benchModeOf,
  benchResultProblems,
  reportLeaks,
  type BenchMode,
  type BenchResult,
  type BenchRow,
  type LineChart,
  type Summary,
  type Target,
  type TargetKind,
} from './bench/result.js';
export {
  bareAtomicWrite,
  brokenResult,
  interleaved,
  resultProblems,
  rowOf,
  summarize,
  timeMs,
  writeBenchResult,
  type BenchIdentity,
  type BenchModule,
  type RowInput,
} from './bench/measure.js';
export { rowMet } from './bench/met.js';
export {
  collectResults,
  missingResults,
  renderMarkdown,
  targetText,
  verdictOf,
  type Collected,
  type ExpectedBench,
  type RenderInput,
  type ResultFile,
  type Verdict,
} from './bench/report.js';
export { chartSvg, escapeXml, formatNumber, linesSvg, ratioBarsSvg } from './bench/svg.js';
export { collectMachineFacts, filesystemOf } from './bench/facts.js';
