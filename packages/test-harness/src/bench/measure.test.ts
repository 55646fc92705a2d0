import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bareAtomicWrite, interleaved, resultProblems, rowOf, summarize, writeBenchResult } from './measure.js';
import { benchModeOf, reportLeaks, type BenchResult } from './result.js';

const dirs: string[] = [];
const scratch = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-measure-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('measuring', () => {
  it('summarizes runs as median, min and max', () => {
    expect(summarize([3, 1, 2])).toEqual({ median: 2, min: 1, max: 3 });
    expect(summarize([4, 1, 2, 3])).toEqual({ median: 2.5, min: 1, max: 4 });
    expect(() => summarize([])).toThrow('no samples');
  });

  it('computes the ratio per run before summarizing it', () => {
    const row = rowOf({ label: 'r', unit: 'ms', values: [2, 9, 4], floors: [1, 3, 4], target: { kind: 'ratio_max', value: 2 } });
    expect(row.ratio).toEqual({ median: 2, min: 1, max: 3 });
    expect(row.floor).toEqual({ median: 3, min: 1, max: 4 });
    expect(rowOf({ label: 'a', unit: 's', values: [1], target: null }).ratio).toBeNull();
  });

  it('alternates which of the two goes first', async () => {
    const order: string[] = [];
    const { values, floors } = await interleaved(
      3,
      () => (order.push('value'), Promise.resolve(1)),
      () => (order.push('floor'), Promise.resolve(2)),
    );
    expect(order).toEqual(['value', 'floor', 'floor', 'value', 'value', 'floor']);
    expect([values, floors]).toEqual([[1, 1, 1], [2, 2, 2]]);
  });

  it('writes the bare atomic floor as a complete file and leaves no temp file', () => {
    const dir = scratch();
    bareAtomicWrite(dir, 'a.json', Buffer.from('{"a":1}'));
    bareAtomicWrite(dir, 'a.json', Buffer.from('{"a":2}'));
    expect(readdirSync(dir)).toEqual(['a.json']);
    expect(readFileSync(join(dir, 'a.json'), 'utf8')).toBe('{"a":2}');
  });

  it('reads the mode from ODUFLOW_BENCH_MODE and refuses an unknown one', () => {
    expect(benchModeOf({})).toBe('default');
    expect(benchModeOf({ ODUFLOW_BENCH_MODE: 'smoke' })).toBe('smoke');
    expect(() => benchModeOf({ ODUFLOW_BENCH_MODE: 'fast' })).toThrow('ODUFLOW_BENCH_MODE');
  });
});

describe('writing a result', () => {
  const result: BenchResult = { schema: 1, id: 'demo-bench', item: 3, title: 't', method: 'm', floor: 'f', mode: 'smoke', rows: [], chart: null, notes: [], ok: true };

  it('writes <id>.json that parses back to the result', () => {
    const dir = scratch();
    const path = writeBenchResult(result, dir);
    expect(path).toBe(join(dir, 'demo-bench.json'));
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(result);
  });

  it('refuses a result that breaks the contract or would leak a path', () => {
    const dir = scratch();
    expect(() => writeBenchResult({ ...result, id: 'Not Kebab' }, dir)).toThrow();
    expect(() => writeBenchResult({ ...result, notes: ['see /tmp/x'] }, dir)).toThrow('an absolute path');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('names each kind of leak it finds', () => {
    expect(reportLeaks('{"notes":["ok at 127.0.0.1"]}')).toEqual([]);
    expect(reportLeaks('host 10.0.0.5 password: x')).toEqual(['a host other than 127.0.0.1', 'a credential word']);
    expect(reportLeaks('TypeError: boom')).toEqual(['an exception message']);
    expect(reportLeaks('{"pillar": {}}')).toEqual(['state data']);
  });
});

describe('checking a module’s results', () => {
  const identity = { id: 'demo-bench', item: 3, title: 't' };
  const good: BenchResult = {
    schema: 1,
    ...identity,
    method: 'm',
    floor: 'f',
    mode: 'smoke',
    rows: [rowOf({ label: 'r', unit: 'ms', values: [2], floors: [1], target: { kind: 'ratio_max', value: 2 } })],
    chart: null,
    notes: [],
    ok: true,
  };

  it('finds nothing wrong with one well-formed result per identity', () => {
    expect(resultProblems([good], [identity], 'smoke')).toEqual([]);
  });

  it('names a missing result, another mode, a broken run, no rows and a leak', () => {
    expect(resultProblems([], [identity], 'smoke')).toEqual(['0 results for 1 benchmarks', 'demo-bench: no result']);
    expect(resultProblems([{ ...good, mode: 'default', ok: false, rows: [], notes: ['/tmp/x'] }], [identity], 'smoke')).toEqual([
      'demo-bench: mode default, not smoke',
      'demo-bench: ok is false',
      'demo-bench: no rows',
      'demo-bench: contains an absolute path',
    ]);
  });
});
