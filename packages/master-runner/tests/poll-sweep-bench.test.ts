import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { homedir, hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { resultProblems } from '../bench/support/result.js';

/*
 * The poll-sweep bench in ODUFLOW_BENCH_MODE=smoke (200 requests, one run,
 * file store and PostgreSQL): it runs end to end and writes a result file
 * the aggregator can read, naming nothing of the machine. No timing is
 * asserted: performance lives in `npm run bench`. (A hostname shorter than
 * four letters is left out: it would match inside ordinary words.)
 */

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = mkdtempSync(join(tmpdir(), 'oduflow-bench-smoke-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('the poll-sweep bench in smoke mode', () => {
  it('writes a well-formed poll-sweep result that names no path, host or secret', () => {
    const run = spawnSync(process.execPath, [join(packageDir, 'bench', 'run-poll-sweep.mjs')], {
      cwd: packageDir,
      env: { ...process.env, ODUFLOW_BENCH_MODE: 'smoke', ODUFLOW_BENCH_OUT: out },
      encoding: 'utf8',
      timeout: 170_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const result = JSON.parse(readFileSync(join(out, 'poll-sweep.json'), 'utf8')) as Record<string, unknown>;
    expect(resultProblems(result, [out, tmpdir() + '/', '/dev/shm', packageDir, homedir(), hostname().length >= 4 ? hostname() : '', 'password', 'Bearer'])).toEqual([]);
    expect(result).toMatchObject({ id: 'poll-sweep', item: 5, mode: 'smoke' });
    // Every size × store × sweep has its wall, CPU and RSS rows (200 requests, 2 stores, 2 sweeps).
    expect((result['rows'] as unknown[]).length).toBe(12);
  }, 180_000);
});
