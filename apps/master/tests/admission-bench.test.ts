import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { resultProblems } from '../../../packages/master-runner/bench/support/result.js';
import { assertBuilt } from './support/cli.js';

/*
 * The admission bench in ODUFLOW_BENCH_MODE=smoke (40 admissions per store,
 * one run, the built serve on a file store and on PostgreSQL): it runs end
 * to end and writes a result file the aggregator can read, naming nothing
 * of the machine, and no token. No timing is asserted: performance lives in
 * `npm run bench`. (A hostname shorter than four letters is left out: it
 * would match inside ordinary words.)
 */

const appDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = mkdtempSync(join(tmpdir(), 'oduflow-bench-smoke-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('the admission bench in smoke mode', () => {
  it('writes a well-formed admission result that names no path, host, token or secret', () => {
    assertBuilt();
    const run = spawnSync(process.execPath, [join(appDir, 'bench', 'run-admission.mjs')], {
      cwd: appDir,
      env: { ...process.env, ODUFLOW_BENCH_MODE: 'smoke', ODUFLOW_BENCH_OUT: out },
      encoding: 'utf8',
      timeout: 170_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(readFileSync(join(out, 'admission.json'), 'utf8')) as Record<string, unknown>;
    const forbidden = [out, tmpdir() + '/', appDir, homedir(), hostname().length >= 4 ? hostname() : '', 'password', 'Bearer', 'odf_'];
    expect(resultProblems(result, forbidden)).toEqual([]);
    expect(result).toMatchObject({ id: 'admission', item: 4, mode: 'smoke' });
    // Rate, p50 and p99 for each store, each beside the PostgreSQL commit floor.
    const rows = result['rows'] as { floor: unknown }[];
    expect(rows).toHaveLength(6);
    expect(rows.every((row) => row.floor !== null)).toBe(true);
  }, 180_000);
});
