import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { highDataInputsFile } from '../bench/high-data.js';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = mkdtempSync(join(tmpdir(), 'canonical-json-bench-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

function isStats(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { median, min, max } = value as Record<string, unknown>;
  return [median, min, max].every((n) => typeof n === 'number' && Number.isFinite(n) && n > 0) && (min as number) <= (median as number) && (median as number) <= (max as number);
}

describe('the canonical-JSON ratio bench', () => {
  it('reads inputs that are exactly what the generator makes, so both languages measure the same bytes', () => {
    const committed: unknown = JSON.parse(readFileSync(join(packageDir, 'bench', 'high-data-inputs.json'), 'utf8'));
    expect(committed).toStrictEqual(highDataInputsFile());
  });

  it('writes a well-formed result in smoke mode, with no path and no state data in it', () => {
    const run = spawnSync(process.execPath, [join(packageDir, 'bench', 'run-canonical-json.mjs')], {
      cwd: packageDir,
      env: { ...process.env, ODUFLOW_BENCH_MODE: 'smoke', ODUFLOW_BENCH_OUT_DIR: outDir },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const text = readFileSync(join(outDir, 'canonical-json-ts.json'), 'utf8');
    const result = JSON.parse(text) as Record<string, unknown>;
    expect(result).toMatchObject({ schema: 1, id: 'canonical-json-ts', item: 1, mode: 'smoke', ok: true });
    for (const field of ['title', 'method', 'floor']) expect(typeof result[field]).toBe('string');
    const rows = result['rows'] as Array<Record<string, unknown>>;
    const labels = ['canonicalJson', 'parseCanonicalJson', 'stateDigest'].flatMap((name) => ['1 KiB', '16 KiB', '60 KiB'].map((size) => `${name}, ${size}`));
    expect(rows.map((row) => row['label']).sort()).toStrictEqual([...labels].sort());
    for (const row of rows) {
      expect(row).toMatchObject({ unit: 'ms', higher_is_better: false, runs: 1 });
      expect(isStats(row['value']) && isStats(row['floor']) && isStats(row['ratio'])).toBe(true);
      const target = String(row['label']).startsWith('stateDigest') ? { kind: 'ratio_max', value: 2 } : null;
      expect(row['target']).toStrictEqual(target);
    }
    expect(text).not.toContain(packageDir);
    expect(text).not.toContain(outDir);
    // No state data: not one state id or config line of the inputs.
    for (const input of highDataInputsFile().inputs) {
      for (const stateId of Object.keys(JSON.parse(input.state_data_json) as object)) expect(text).not.toContain(stateId);
    }
  });
});
