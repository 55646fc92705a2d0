import { z } from 'zod';

/*
 * The benchmark result contract of issue 12 (one JSON file per benchmark under
 * <repo>/.test-results/bench/<id>.json): every benchmark measures a thing and
 * its floor side by side in the same run and reports both, with their ratio,
 * so a shared, noisy machine still yields a number that means something.
 * The aggregator (scripts/bench.mjs) validates each file against this schema
 * before it renders BENCHMARKS.md; the benchmarks' smoke tests do the same.
 */

export const BENCH_MODES = ['smoke', 'default', 'full'] as const;
export type BenchMode = (typeof BENCH_MODES)[number];

export const TARGET_KINDS = ['ratio_max', 'ratio_min', 'value_max', 'value_min'] as const;
export type TargetKind = (typeof TARGET_KINDS)[number];

// zod 4 numbers are finite (NaN and ±Infinity fail).
const finite = z.number();

const SummarySchema = z
  .object({ median: finite, min: finite, max: finite })
  .strict()
  .refine((s) => s.min <= s.median && s.median <= s.max, { message: 'min <= median <= max' });
export type Summary = z.infer<typeof SummarySchema>;

const TargetSchema = z.object({ kind: z.enum(TARGET_KINDS), value: finite }).strict();
export type Target = z.infer<typeof TargetSchema>;

const BenchRowSchema = z
  .object({
    label: z.string().min(1).max(200),
    unit: z.string().min(1).max(40),
    value: SummarySchema,
    floor: SummarySchema.nullable(),
    ratio: SummarySchema.nullable(),
    higher_is_better: z.boolean(),
    runs: z.number().int().min(1),
    target: TargetSchema.nullable(),
    met: z.boolean().optional(),
  })
  .strict()
  .refine((row) => row.target === null || !row.target.kind.startsWith('ratio') || row.ratio !== null, {
    message: 'a ratio target needs a ratio',
  });
export type BenchRow = z.infer<typeof BenchRowSchema>;

const LineChartSchema = z
  .object({
    kind: z.literal('lines'),
    x_label: z.string().min(1).max(80),
    y_label: z.string().min(1).max(80),
    series: z
      .array(z.object({ name: z.string().min(1).max(80), points: z.array(z.tuple([finite, finite])).min(1) }).strict())
      .min(1),
    target_line: finite.optional(),
  })
  .strict();
export type LineChart = z.infer<typeof LineChartSchema>;

const BENCH_ID_PATTERN = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

export const BenchResultSchema = z
  .object({
    schema: z.literal(1),
    id: z.string().regex(BENCH_ID_PATTERN).max(80),
    item: z.number().int().min(1).max(7),
    title: z.string().min(1).max(200),
    method: z.string().min(1).max(4000),
    floor: z.string().min(1).max(1000),
    mode: z.enum(BENCH_MODES),
    rows: z.array(BenchRowSchema),
    chart: LineChartSchema.nullable().optional(),
    notes: z.array(z.string().max(2000)),
    ok: z.boolean(),
  })
  .strict();
export type BenchResult = z.infer<typeof BenchResultSchema>;

/** Problems of one result file, in words (empty when it is well formed). Never throws. */
export function benchResultProblems(value: unknown): string[] {
  const parsed = BenchResultSchema.safeParse(value);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`);
}

/** The mode of this run, from ODUFLOW_BENCH_MODE (default `default`); anything else is a mistake worth stopping for. */
export function benchModeOf(env: NodeJS.ProcessEnv = process.env): BenchMode {
  const raw = env['ODUFLOW_BENCH_MODE'] ?? 'default';
  const mode = BENCH_MODES.find((m) => m === raw);
  if (mode === undefined) throw new Error(`ODUFLOW_BENCH_MODE must be one of ${BENCH_MODES.join(', ')}`);
  return mode;
}

/*
 * What a report must never carry (contract: no paths, no hostnames beyond
 * 127.0.0.1, no exception messages, no state data, no credentials). A cheap
 * scan of the serialized result, shared by the smoke tests and the
 * aggregator so the rule has one owner.
 */
const FORBIDDEN: readonly { readonly what: string; readonly pattern: RegExp }[] = [
  { what: 'an absolute path', pattern: /(?:^|[\s"'(=])\/(?:tmp|home|root|var|dev|proc|usr|etc|work|srv|opt|run)\b/ },
  { what: 'a URL with credentials', pattern: /[a-z][a-z0-9+.-]*:\/\/[^\s/"@]+:[^\s/"@]+@/i },
  { what: 'a host other than 127.0.0.1', pattern: /\b(?:localhost|(?!127\.0\.0\.1\b)\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\b/ },
  { what: 'a credential word', pattern: /\b(?:password|passwd|secret|token|api[_-]?key)\s*[:=]/i },
  { what: 'an exception message', pattern: /\w*(?:Error|Exception)\b:|\bTraceback\b|\bat [\w.<>]+ \(/ },
  { what: 'state data', pattern: /"(?:state_data|pillar|contents)"\s*:/ },
];

/** What in `text` (a serialized result) a report must not contain, in words (empty when clean). */
export function reportLeaks(text: string): string[] {
  return FORBIDDEN.filter(({ pattern }) => pattern.test(text)).map(({ what }) => what);
}
