/*
 * The smoke run of the live benchmarks (issue 12 items 2 and 6): bench/live.ts
 * in ODUFLOW_BENCH_MODE=smoke, on a real loopback Salt topology with one
 * trial of each part, writing into a private directory. Asserts the result
 * files are well formed and carry no path, host, identifier or state data;
 * never a timing (the benchmarks own their targets).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const PACKAGE_DIR = resolve(import.meta.dirname, '..');
const TARGET_KINDS = new Set(['ratio_max', 'ratio_min', 'value_max', 'value_min']);
/** Things a report must never hold: absolute paths, JIDs, UUIDs (request and minion ids), raw state output, tokens. */
const FORBIDDEN = [
  /(^|[\s"'(=])\/(tmp|work|home|root|var|etc|usr|srv|proc)\//,
  /\b\d{20}\b/,
  /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i,
  /_\|-/,
  /"(changes|comment|stdout|stderr|__run_num__|__sls__)"/,
  /bench_one_state|client_storage_resize_slow|sleep \d/,
  /odf_[a-z0-9]/i,
  /password|token|secret/i,
];

function isStat(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { median, min, max } = value as Record<string, unknown>;
  return [median, min, max].every((n) => typeof n === 'number' && Number.isFinite(n)) && (min as number) <= (median as number) && (median as number) <= (max as number);
}

describe('the live benchmarks in smoke mode', () => {
  let out: string;
  let status: number | null;
  const results = new Map<string, Record<string, unknown>>();
  const texts = new Map<string, string>();

  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), 'oduflow-bench-smoke-'));
    const run = spawnSync(process.execPath, [join(PACKAGE_DIR, 'bench', 'run-live.mjs')], {
      cwd: PACKAGE_DIR,
      env: { ...process.env, ODUFLOW_BENCH_MODE: 'smoke', ODUFLOW_BENCH_OUT: out },
      encoding: 'utf8',
      timeout: 170_000,
    });
    status = run.status;
    for (const name of readdirSync(out)) {
      const text = readFileSync(join(out, name), 'utf8');
      texts.set(name, text);
      results.set(name, JSON.parse(text) as Record<string, unknown>);
    }
  }, 180_000);

  afterAll(() => {
    rmSync(out, { recursive: true, force: true });
  });

  it('exits 0 and writes exactly the minion-overhead and lost-return-recovery results', () => {
    expect(status).toBe(0);
    expect([...results.keys()].sort()).toEqual(['lost-return-recovery.json', 'minion-overhead.json']);
  });

  it('writes results that follow the benchmark contract, every number finite', () => {
    for (const [name, result] of results) {
      expect(result).toMatchObject({ schema: 1, id: name.replace(/\.json$/, ''), mode: 'smoke', ok: true, chart: null });
      expect(result['item']).toBe(name.startsWith('minion') ? 2 : 6);
      for (const key of ['title', 'method', 'floor']) expect(typeof result[key]).toBe('string');
      expect((result['notes'] as unknown[]).every((n) => typeof n === 'string')).toBe(true);
      const rows = result['rows'] as Array<Record<string, unknown>>;
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(typeof row['label']).toBe('string');
        expect(typeof row['unit']).toBe('string');
        expect(typeof row['higher_is_better']).toBe('boolean');
        expect(isStat(row['value'])).toBe(true);
        for (const key of ['floor', 'ratio']) expect(row[key] === null || isStat(row[key])).toBe(true);
        expect(Number.isInteger(row['runs']) && (row['runs'] as number) > 0).toBe(true);
        const target = row['target'] as { kind?: unknown; value?: unknown } | null;
        expect(target === null || (TARGET_KINDS.has(String(target.kind)) && Number.isFinite(target.value))).toBe(true);
      }
    }
  });

  it('measures the protocol I/O against its floor, the live applies, and both recovery rates', () => {
    const labels = (id: string) => (results.get(`${id}.json`)?.['rows'] as Array<{ label: string; target: unknown }>).map((r) => r.label);
    const overhead = labels('minion-overhead');
    expect(overhead.some((l) => l.startsWith('protocol I/O per apply'))).toBe(true);
    expect(overhead.some((l) => l.startsWith('oduflow_job.run vs state.sls'))).toBe(true);
    const recovery = results.get('lost-return-recovery.json')?.['rows'] as Array<{ label: string; value: { median: number } }>;
    // One trial: the oduflow request is recovered (its record is exact, not a timing) and plain Salt's rate is reported.
    expect(recovery.find((r) => r.label === 'oduflow: requests recovered')?.value.median).toBe(100);
    expect(recovery.some((r) => r.label.startsWith('plain Salt'))).toBe(true);
  });

  it('keeps paths, the host name, identifiers, tokens and state output out of every result', () => {
    for (const text of texts.values()) {
      for (const pattern of FORBIDDEN) expect(text).not.toMatch(pattern);
      expect(text).not.toContain(PACKAGE_DIR);
      expect(text).not.toContain(tmpdir());
      expect(text).not.toMatch(new RegExp(`\\b${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`));
    }
  });
});
