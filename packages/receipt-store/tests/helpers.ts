import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** A fresh 0700 directory under the system temp dir; removed by the returned cleanup. */
export function makeTempRoot(): { root: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), 'receipt-store-test-'));
  return { root, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Polls `condition` until it returns a truthy value or the deadline passes. */
export async function waitFor<T>(condition: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<Awaited<T>>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 5));
  }
}

let bundlePath: string | undefined;

/**
 * The library bundled as one ESM file for child Node processes (Node 20 cannot
 * run the TypeScript sources). It lives in build/ next to build/Release, so
 * its `../build/Release/receipt_store.node` resolves to the real addon.
 */
export function childBundle(): string {
  if (bundlePath !== undefined) return bundlePath;
  const outfile = join(packageDir, 'build', 'test-child.mjs');
  mkdirSync(dirname(outfile), { recursive: true });
  const result = buildSync({
    entryPoints: [join(packageDir, 'src', 'index.ts')],
    bundle: true,
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
  bundlePath = outfile;
  return outfile;
}

export interface Child {
  readonly process: ChildProcessWithoutNullStreams;
  /** Everything the child printed on stdout so far. */
  output(): string;
  /** Waits until the child printed a complete line starting with `line`; resolves with that line. */
  waitForLine(line: string, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code or signal once the child has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILLs the child and waits until it is gone. */
  kill(): Promise<void>;
}

function wrap(child: ChildProcessWithoutNullStreams): Child {
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveExit) => {
    child.on('exit', (code, signal) => {
      done = true;
      resolveExit({ code, signal });
    });
  });
  return {
    process: child,
    output: () => stdout,
    exited,
    async waitForLine(line, timeoutMs = 15_000) {
      return waitFor(
        () => {
          const complete = stdout.split('\n').slice(0, -1); // only lines ended by a newline
          const found = complete.find((l) => l.startsWith(line));
          if (found === undefined && done) throw new Error(`child exited before printing "${line}"; stderr: ${stderr}`);
          return found;
        },
        `the child to print "${line}" (stdout so far: ${JSON.stringify(stdout)}, stderr: ${JSON.stringify(stderr)})`,
        timeoutMs,
      );
    },
    async kill() {
      if (!done) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs an ESM snippet in a separate Node process; `LIB` in it is the bundled library's file URL. */
export function spawnNode(script: string, args: string[] = []): Child {
  const lib = `file://${childBundle()}`;
  const source = `const LIB = ${JSON.stringify(lib)};\n${script}`;
  return wrap(spawn(process.execPath, ['--input-type=module', '-e', source, '--', ...args], { stdio: 'pipe' }));
}

/** Runs a Python snippet in a separate python3 process. */
export function spawnPython(script: string, args: string[] = []): Child {
  return wrap(spawn('python3', ['-c', script, ...args], { stdio: 'pipe' }));
}

export const isRoot = process.getuid?.() === 0;
