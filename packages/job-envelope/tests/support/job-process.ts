import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import type { JobReport } from '../../src/report.js';
import type { ChildJob } from './job-child.js';

/*
 * Runs job-child.ts in a real Node process (Node 20 cannot run the
 * TypeScript sources, so it is bundled first; our dependencies stay imports
 * of their built dist). Every wait has a deadline.
 */

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
let bundle: string | undefined;

export function childBundle(): string {
  if (bundle !== undefined) return bundle;
  // Inside the package, so the bare imports resolve through the workspace's node_modules.
  const outfile = join(packageDir, 'build', 'job-child.mjs');
  mkdirSync(dirname(outfile), { recursive: true });
  const result = buildSync({
    entryPoints: [join(packageDir, 'tests', 'support', 'job-child.ts')],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    logLevel: 'error',
  });
  // Test files run in parallel processes: write privately, then rename over the shared name.
  const temporary = `${outfile}.${process.pid}`;
  writeFileSync(temporary, result.outputFiles[0]?.contents ?? '');
  renameSync(temporary, outfile);
  bundle = outfile;
  return outfile;
}

export interface ChildRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface JobProcess {
  readonly pid: number;
  /** Resolves with the first stdout line starting with `prefix` (without the prefix). */
  line(prefix: string): Promise<string>;
  /** SIGKILLs the child and resolves with how it ended. */
  kill(): Promise<ChildRun>;
  readonly ended: Promise<ChildRun>;
}

const DEADLINE_MS = 20_000;

export function startJob(job: ChildJob): JobProcess {
  const child: ChildProcess = spawn(process.execPath, [childBundle(), JSON.stringify(job)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const ended = new Promise<ChildRun>((done, fail) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`the job child did not end within ${DEADLINE_MS} ms; stdout: ${stdout} stderr: ${stderr}`));
    }, DEADLINE_MS);
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
  const line = (prefix: string): Promise<string> =>
    new Promise<string>((done, fail) => {
      const started = Date.now();
      const check = (): void => {
        const found = stdout.split('\n').slice(0, -1).find((l) => l.startsWith(prefix));
        if (found !== undefined) return done(found.slice(prefix.length));
        if (child.exitCode !== null || child.signalCode !== null) return fail(new Error(`the job child ended before printing "${prefix}"; stderr: ${stderr}`));
        if (Date.now() - started > DEADLINE_MS) return fail(new Error(`the job child did not print "${prefix}" within ${DEADLINE_MS} ms`));
        setTimeout(check, 5);
      };
      check();
    });
  return {
    pid: child.pid ?? -1,
    ended,
    line,
    kill: async () => {
      child.kill('SIGKILL');
      return ended;
    },
  };
}

/** Runs a child job to its end (or its self-inflicted SIGKILL). */
export async function runChild(job: ChildJob): Promise<ChildRun> {
  return startJob(job).ended;
}

/** The report a child printed, or a failure that shows what it printed instead. */
export function reportOf(run: ChildRun): JobReport {
  const line = run.stdout.split('\n').find((l) => l.startsWith('REPORT '));
  if (line === undefined) throw new Error(`the child printed no report; stdout: ${run.stdout} stderr: ${run.stderr}`);
  return JSON.parse(line.slice('REPORT '.length)) as JobReport;
}
