/*
 * End-to-end (issue 8, item 5): `oduflow-master verify-fleet` — the shipped
 * CLI — against a real local Salt topology of three minions installed the
 * production way: one left as installed (ready), one whose installed module
 * was changed on disk and the minion restarted (its digest is no longer the
 * reviewed one), and one stopped (its key is accepted, it does not answer).
 * No Salt is mocked; the CLI takes the reviewed digest from
 * @oduflow/minion-wrapper, as in production.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { moduleSha256 } from '@oduflow/minion-wrapper';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findMasterCli } from '../../src/demo.js';
import { fileSha256, startTopology, type Topology } from '../../src/topology.js';
import { listFiles, scenarioTimer } from './support/e2e.js';

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

describe('verify-fleet on a live Salt topology', () => {
  let topo: Topology;
  let scratch: string;
  let cli: string;
  let ready: string;
  let tampered: string;
  let stopped: string;

  const verifyFleet = (args: readonly string[]): Promise<Run> =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [cli, 'verify-fleet', '--json', ...args], {
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          ODUFLOW_SALT_API_URL: topo.saltApiUrl,
          ODUFLOW_SALT_API_USER: topo.username,
          ODUFLOW_SALT_API_PASSWORD_FILE: topo.passwordFile,
          ODUFLOW_SALT_API_EAUTH: topo.eauth,
          ODUFLOW_CALL_TIMEOUT_MS: '15000',
          ODUFLOW_STORE: join(scratch, 'store'),
          ODUFLOW_LOG_LEVEL: 'silent',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  const rowsOf = (run: Run): Record<string, unknown>[] => {
    try {
      return (JSON.parse(run.stdout) as { records: Record<string, unknown>[] }).records;
    } catch {
      throw new Error(`verify-fleet printed no JSON (exit ${run.code}): ${run.stdout}\n${run.stderr}`);
    }
  };

  beforeAll(async () => {
    const found = findMasterCli();
    if (found === null) throw new Error('apps/master/dist/cli.js not found: build first (npx nx run-many -t build)');
    cli = found;
    const t = scenarioTimer('topology F start (3 minions)');
    topo = await startTopology({ minions: 3, startTimeoutMs: 120_000 });
    [ready, tampered, stopped] = topo.minionIds as [string, string, string];
    scratch = mkdtempSync(join(tmpdir(), 'oduflow-e2e-fleet-'));
    chmodSync(scratch, 0o700);

    // The installed module changed on disk (one more line), then loaded by a restarted minion.
    const installed = join(topo.extmodsDir(tampered), 'modules', 'oduflow_job.py');
    expect(fileSha256(installed)).toBe(moduleSha256());
    appendFileSync(installed, '\n# changed on the host after installation\n');
    await topo.stopMinion(tampered);
    await topo.startMinion(tampered);
    await topo.stopMinion(stopped);
    t('ready');
  }, 240_000);

  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    if (topo !== undefined) {
      await topo.stop();
      expect(topo.leftoverProcesses()).toEqual([]);
    }
  }, 60_000);

  it('reports the ready minion, the changed module and the stopped minion, and does not exit 0', async () => {
    const done = scenarioTimer('verify-fleet: ready, changed module, stopped minion');
    const run = await verifyFleet([]);
    expect(run.code, run.stderr).toBe(2);
    const rows = rowsOf(run);
    const byId = new Map(rows.map((r) => [r['minion_id'], r]));
    expect(rows).toHaveLength(3);
    expect(byId.get(ready)).toMatchObject({ status: 'ready', salt_version: '3006.27', module_sha256: moduleSha256(), reasons: null });
    expect(byId.get(tampered)).toMatchObject({ status: 'digest_differs' });
    expect(byId.get(tampered)?.['module_sha256']).toBe(fileSha256(join(topo.extmodsDir(tampered), 'modules', 'oduflow_job.py')));
    expect(byId.get(stopped)).toMatchObject({ status: 'no_answer', module_sha256: null });
    expect(JSON.parse(run.stdout)).toMatchObject({ minions: 3, ready: 1, expected_sha256: moduleSha256() });
    // Read-only: no store, nothing on any minion's receipt store.
    expect(existsSync(join(scratch, 'store'))).toBe(false);
    for (const id of topo.minionIds) expect(listFiles(join(topo.receiptDir(id), 'requests'))).toEqual([]);
    done(`rows ${rows.map((r) => r['status']).join(', ')}; exit ${run.code}`);
  }, 120_000);

  it('exits 0 for the ready minion alone, and 3 for the stopped one alone', async () => {
    const alone = await verifyFleet(['--minion', ready]);
    expect(alone.code, alone.stderr).toBe(0);
    expect(rowsOf(alone)).toMatchObject([{ minion_id: ready, status: 'ready' }]);

    const silent = await verifyFleet(['--minion', stopped]);
    expect(silent.code, silent.stderr).toBe(3);
    expect(rowsOf(silent)).toMatchObject([{ minion_id: stopped, status: 'no_answer' }]);
  }, 120_000);
});
