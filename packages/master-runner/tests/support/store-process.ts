import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import type { RequestRecord } from '@oduflow/protocol';
import type { StoreCrashPoint } from '../../src/crash-points.js';

/*
 * Runs store-child.ts in a real Node process (Node 20 cannot run the
 * TypeScript sources, so it is bundled first, with our packages left as
 * imports of their built dist). Every wait has a deadline.
 */

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
let bundle: string | undefined;

function childBundle(): string {
  if (bundle !== undefined) return bundle;
  // Inside the package, so the bare imports resolve through its node_modules.
  const outfile = join(packageDir, 'build', 'store-child.mjs');
  mkdirSync(dirname(outfile), { recursive: true });
  const result = buildSync({
    entryPoints: [join(packageDir, 'tests', 'support', 'store-child.ts')],
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

export interface StoreJob {
  readonly op: 'create' | 'update' | 'migrate';
  readonly root: string;
  readonly record?: RequestRecord;
  readonly at?: StoreCrashPoint;
  readonly nth?: number;
  readonly then?: 'kill' | 'hold';
}

export interface StoreRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface StoreProcess {
  /** Resolves once the child printed HOLDING (it holds its locks until killed). */
  holding(): Promise<void>;
  /** SIGKILLs the child and resolves with how it ended. */
  kill(): Promise<StoreRun>;
  readonly ended: Promise<StoreRun>;
}

const DEADLINE_MS = 20_000;

export function startStoreJob(job: StoreJob, env: Readonly<Record<string, string>> = {}): StoreProcess {
  const child: ChildProcess = spawn(process.execPath, [childBundle(), JSON.stringify(job)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const ended = new Promise<StoreRun>((done, fail) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`the store child did not end within ${DEADLINE_MS} ms; stdout: ${stdout} stderr: ${stderr}`));
    }, DEADLINE_MS);
    child.on('error', fail);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
  return {
    ended,
    holding: () =>
      new Promise<void>((done, fail) => {
        const started = Date.now();
        const check = (): void => {
          if (stdout.includes('HOLDING\n')) return done();
          if (child.exitCode !== null || child.signalCode !== null) return fail(new Error(`the store child ended before holding; stderr: ${stderr}`));
          if (Date.now() - started > DEADLINE_MS) return fail(new Error(`the store child did not hold within ${DEADLINE_MS} ms`));
          setTimeout(check, 5);
        };
        check();
      }),
    kill: async () => {
      child.kill('SIGKILL');
      return ended;
    },
  };
}

/** Runs a job to its end (or its crash point) and returns how it ended. */
export async function runStoreJob(job: StoreJob, env: Readonly<Record<string, string>> = {}): Promise<StoreRun> {
  return startStoreJob(job, env).ended;
}
