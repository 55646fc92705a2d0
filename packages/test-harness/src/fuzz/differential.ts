import fc from 'fast-check';
import { PROTOCOL_CATEGORIES, type ProtocolCategory } from '../fixture-runners.js';
import { anyFuzzCase, asSent } from './cases.js';
import type { FuzzCase } from './fuzz-case.js';
import { type Outcome, protocolOutcome, sameOutcome } from './outcome.js';
import type { Oracle } from './python-oracle.js';

/*
 * The differential fuzz loop: generate cases with fast-check (seeded, in
 * chunks so that millions never sit in memory), answer each with
 * @oduflow/protocol here and with the Python module in one batch round trip,
 * and compare. Python works on one batch while this process generates and
 * answers the next, so the two cores share the work. A disagreement is replayed from
 * its seed and path and shrunk by fast-check to a small case of the same kind.
 */

export interface FuzzOptions {
  readonly cases: number;
  readonly seed: number;
  /** Cases per Python round trip (default 500). */
  readonly batchSize?: number;
  /** Cases generated per fast-check sample (default 2000); each chunk has its own derived seed. */
  readonly chunkSize?: number;
  /** Shrink each distinct disagreement (default true). */
  readonly shrink?: boolean;
  /** Distinct disagreements shrunk and reported in full (default 20); all are counted. */
  readonly maxReported?: number;
  /** The case generator (default: every category). */
  readonly arbitrary?: fc.Arbitrary<FuzzCase>;
  readonly onProgress?: (done: number, elapsedMs: number) => void;
}

export interface Disagreement {
  /** The case as both sides received it, shrunk when shrinking was on. */
  readonly case: FuzzCase;
  readonly typescript: Outcome;
  readonly python: Outcome;
  /** Replays the unshrunk case: `fc.sample(arbitrary, { seed, path, numRuns: 1 })`. */
  readonly replay: { readonly seed: number; readonly path: string };
  /** Cases of the run that disagreed the same way (category and both outcomes' kinds and codes). */
  readonly occurrences: number;
}

interface CategoryCounts {
  cases: number;
  accepted: number;
  rejected: number;
}

export interface FuzzReport {
  readonly seed: number;
  readonly cases: number;
  readonly elapsedMs: number;
  readonly casesPerSecond: number;
  /** Every case that disagreed. */
  readonly disagreeing: number;
  /** One per way of disagreeing, up to maxReported. */
  readonly disagreements: readonly Disagreement[];
  readonly byCategory: Readonly<Record<ProtocolCategory, CategoryCounts>>;
  /** How often each error code was the agreed answer: the generators reach every rule. */
  readonly codes: Readonly<Record<string, number>>;
}

/** The seed of chunk `k` of a run seeded `seed` (a 32-bit integer, as fast-check takes). */
function chunkSeed(seed: number, k: number): number {
  return (Math.imul(k + 1, 0x9e3779b1) ^ seed) | 0;
}

function signature(c: FuzzCase, ts: Outcome, py: Outcome): string {
  const part = (o: Outcome) => (o.kind === 'ok' ? 'ok' : o.kind === 'error' ? `error:${o.code}` : `crash:${o.name}`);
  return `${c.category} ${part(ts)} ${part(py)}`;
}

interface Found {
  readonly case: FuzzCase;
  readonly typescript: Outcome;
  readonly python: Outcome;
  readonly replay: { readonly seed: number; readonly path: string };
  occurrences: number;
}

async function agreeOn(oracle: Oracle, generated: FuzzCase): Promise<{ sent: FuzzCase; typescript: Outcome; python: Outcome }> {
  const sent = asSent(generated);
  const [python] = await oracle.evaluate([sent]);
  return { sent, typescript: protocolOutcome(sent), python: python as Outcome };
}

/** Replays a disagreement from its seed and path and lets fast-check shrink it while it still disagrees. */
async function shrunk(oracle: Oracle, arbitrary: fc.Arbitrary<FuzzCase>, found: Found): Promise<Found> {
  const result = await fc.check(
    fc.asyncProperty(arbitrary, async (generated) => {
      const { typescript, python } = await agreeOn(oracle, generated);
      return sameOutcome(typescript, python);
    }),
    { seed: found.replay.seed, path: found.replay.path, numRuns: 1, interruptAfterTimeLimit: 30_000 },
  );
  if (!result.failed || result.counterexample === null) return found;
  const { sent, typescript, python } = await agreeOn(oracle, result.counterexample[0]);
  if (sameOutcome(typescript, python)) return found;
  return { ...found, case: sent, typescript, python };
}

function emptyCounts(): Record<ProtocolCategory, CategoryCounts> {
  return Object.fromEntries(PROTOCOL_CATEGORIES.map((c) => [c, { cases: 0, accepted: 0, rejected: 0 }])) as Record<ProtocolCategory, CategoryCounts>;
}

/** Runs `options.cases` cases through both implementations and reports every disagreement. */
export async function runDifferentialFuzz(oracle: Oracle, options: FuzzOptions): Promise<FuzzReport> {
  const batchSize = options.batchSize ?? 500;
  const chunkSize = options.chunkSize ?? 2000;
  const arbitrary = options.arbitrary ?? anyFuzzCase;
  const maxReported = options.maxReported ?? 20;
  const byCategory = emptyCounts();
  const codes: Record<string, number> = {};
  const found = new Map<string, Found>();
  let disagreeing = 0;
  let done = 0;
  const started = performance.now();

  const compare = (batch: readonly FuzzCase[], ours: readonly Outcome[], theirs: readonly Outcome[], seed: number, offset: number) => {
    batch.forEach((c, i) => {
      const typescript = ours[i] as Outcome;
      const python = theirs[i] as Outcome;
      const counts = byCategory[c.category];
      counts.cases += 1;
      if (sameOutcome(typescript, python)) {
        if (typescript.kind === 'ok') counts.accepted += 1;
        else if (typescript.kind === 'error') {
          counts.rejected += 1;
          codes[typescript.code] = (codes[typescript.code] ?? 0) + 1;
        }
        return;
      }
      disagreeing += 1;
      const key = signature(c, typescript, python);
      const seen = found.get(key);
      if (seen !== undefined) seen.occurrences += 1;
      else if (found.size < maxReported) found.set(key, { case: c, typescript, python, replay: { seed, path: String(offset + i) }, occurrences: 1 });
    });
    done += batch.length;
    options.onProgress?.(done, performance.now() - started);
  };

  // Two batches in flight: Python answers one while this process generates and answers the next.
  let previous: { batch: FuzzCase[]; ours: Outcome[]; answered: Promise<Outcome[]>; seed: number; offset: number } | undefined;
  let generated = 0;
  for (let k = 0; generated < options.cases; k += 1) {
    const seed = chunkSeed(options.seed, k);
    const chunk = fc.sample(arbitrary, { seed, numRuns: Math.min(chunkSize, options.cases - generated) });
    generated += chunk.length;
    for (let offset = 0; offset < chunk.length; offset += batchSize) {
      const batch = chunk.slice(offset, offset + batchSize).map(asSent);
      const answered = oracle.evaluate(batch);
      const ours = batch.map(protocolOutcome);
      if (previous !== undefined) compare(previous.batch, previous.ours, await previous.answered, previous.seed, previous.offset);
      previous = { batch, ours, answered, seed, offset };
    }
  }
  if (previous !== undefined) compare(previous.batch, previous.ours, await previous.answered, previous.seed, previous.offset);
  const elapsedMs = performance.now() - started;

  const disagreements: Disagreement[] = [];
  for (const first of found.values()) {
    disagreements.push(options.shrink === false ? first : await shrunk(oracle, arbitrary, first));
  }
  return {
    seed: options.seed,
    cases: done,
    elapsedMs,
    casesPerSecond: Math.round((done / elapsedMs) * 1000),
    disagreeing,
    disagreements,
    byCategory,
    codes,
  };
}
