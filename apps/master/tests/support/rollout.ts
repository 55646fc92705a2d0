import { spawn } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CliRun } from './cli.js';

/*
 * Shared pieces of the rollout CLI tests: target lists, a targets file, the
 * report a `--json` run printed, and a report without what differs between
 * two runs of the same rollout (ids, request ids derived from them, timings).
 */

export function targetsOf(n: number, prefix = '0190e6a5-1c2d-7e3f-8a4b'): string[] {
  return Array.from({ length: n }, (_, i) => `client-${prefix}-${String(i).padStart(12, '0')}`);
}

export function writeTargets(dir: string, targets: readonly string[], name = 'targets.txt'): string {
  const path = join(dir, name);
  writeFileSync(path, `# rollout targets\n${targets.join('\n')}\n`);
  return path;
}

export type Report = Record<string, unknown> & {
  rollout_id: string;
  run_id: string;
  status: string;
  halted: string | null;
  counts: Record<string, number>;
  stages: Record<string, unknown>[];
  targets: (Record<string, unknown> & { minion_id: string; request_id: string | null; outcome: string })[];
};

/** The JSON report a `rollout … --json` run printed on stdout (its last line). */
export function reportOf(run: CliRun): Report {
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(line) as Report;
  } catch {
    throw new Error(`no JSON report (exit ${run.code}, signal ${run.signal}): ${run.stdout}\nstderr: ${run.stderr}`);
  }
}

/** A report without run ids, request ids and timings: equal for two runs of the same rollout that ended the same. */
export function comparable(report: Report): unknown {
  return {
    ...report,
    rollout_id: '*',
    run_id: '*',
    resumed_from: '*',
    superseded_by: '*',
    started_at: '*',
    finished_at: '*',
    duration_ms: '*',
    stages: report.stages.map((s) => ({ ...s, started_at: '*', finished_at: '*', duration_ms: '*' })),
    targets: report.targets.map((t) => ({ ...t, request_id: t.request_id === null ? null : '*' })),
  };
}

/** The run directories of a rollout workspace. */
export function runIds(workspace: string): string[] {
  return readdirSync(join(workspace, 'runs')).sort();
}

/** Runs an entry with `input` on its standard input. */
export function runWithInput(entry: string, args: readonly string[], env: Readonly<Record<string, string>>, input: string): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** Runs a command line under script(1), on a pseudo-terminal; what the terminal showed. */
export function runOnTerminal(command: string, env: Readonly<Record<string, string>>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qec', command, '/dev/null'], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', TERM: 'xterm', COLUMNS: '160', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}
