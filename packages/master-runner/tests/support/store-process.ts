import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import type { RequestRecord } from '@oduflow/protocol';
import type { CrashPoint, StoreCrashPoint } from '../../src/crash-points.js';
import type { AdmissionKey } from '../../src/record-store.js';

/*
 * Runs store-child.ts (or relay-child.ts) in a real Node process (Node 20 cannot run the
 * TypeScript sources, so it is bundled first, with our packages left as
 * imports of their built dist). Every wait has a deadline.
 */

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
type ChildName = 'store-child' | 'relay-child';
const bundles = new Map<ChildName, string>();

function childBundle(name: ChildName): string {
  const built = bundles.get(name);
  if (built !== undefined) return built;
  // Inside the package, so the bare imports resolve through its node_modules.
  const outfile = join(packageDir, 'build', `${name}.mjs`);
  mkdirSync(dirname(outfile), { recursive: true });
  const result = buildSync({
    entryPoints: [join(packageDir, 'tests', 'support', `${name}.ts`)],
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
  bundles.set(name, outfile);
  return outfile;
}

export interface StoreJob {
  readonly op: 'create' | 'update' | 'migrate';
  readonly root: string;
  readonly record?: RequestRecord;
  /** With op create: claim this key under the record's request id, then create with it. */
  readonly key?: AdmissionKey;
  readonly outbox?: { readonly stateDataJson: string };
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

/** relay-child.ts: one relayOnce pass over the store, SIGKILLed at `at` (or killed by the parent while it holds a publication). */
export interface RelayJob {
  readonly root: string;
  readonly url: string;
  readonly username: string;
  readonly passwordFile: string;
  readonly at?: CrashPoint;
}

export function startStoreJob(job: StoreJob, env: Readonly<Record<string, string>> = {}): StoreProcess {
  return startChild('store-child', job, env);
}

export function startRelayJob(job: RelayJob): StoreProcess {
  return startChild('relay-child', job, {});
}

function startChild(name: ChildName, job: StoreJob | RelayJob, env: Readonly<Record<string, string>>): StoreProcess {
  const child: ChildProcess = spawn(process.execPath, [childBundle(name), JSON.stringify(job)], {
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
      fail(new Error(`the child did not end within ${DEADLINE_MS} ms; stdout: ${stdout} stderr: ${stderr}`));
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
          if (child.exitCode !== null || child.signalCode !== null) return fail(new Error(`the child ended before holding; stderr: ${stderr}`));
          if (Date.now() - started > DEADLINE_MS) return fail(new Error(`the child did not hold within ${DEADLINE_MS} ms`));
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
