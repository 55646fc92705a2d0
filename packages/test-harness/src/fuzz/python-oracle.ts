import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { modulePath } from '@oduflow/minion-wrapper';
import { harnessRoot } from '../package-root.js';
import { repoRoot } from '../topology-paths.js';
import type { FuzzCase } from './fuzz-case.js';
import type { Outcome } from './outcome.js';

/** Anything that answers batches of fuzz cases: the Python module, or a test's stand-in. */
export interface Oracle {
  evaluate(cases: readonly FuzzCase[]): Promise<Outcome[]>;
}

export interface PythonOracleOptions {
  /** The module under test (default: the one @oduflow/minion-wrapper ships). */
  readonly modulePath?: string;
  /** The interpreter (default: `<repo>/.venv/bin/python`, or `$ODUFLOW_VENV/bin/python`). */
  readonly python?: string;
}

/** The oracle script shipped in this package's python/ directory. */
function fuzzOracleScript(): string {
  return join(harnessRoot(), 'python', 'fuzz_oracle.py');
}

function defaultPython(): string {
  return join(process.env.ODUFLOW_VENV ?? join(repoRoot(), '.venv'), 'bin', 'python');
}

type Wire = ['ok', string] | ['error', string] | ['crash', string];

function outcomeOf(wire: Wire): Outcome {
  switch (wire[0]) {
    case 'ok':
      return { kind: 'ok', bytes: wire[1] };
    case 'error':
      return { kind: 'error', code: wire[1] };
    default:
      return { kind: 'crash', name: wire[1] };
  }
}

/**
 * One long-lived Python process running `python/fuzz_oracle.py` against the
 * real `oduflow_job.py`: a batch is one JSON line out and one JSON line
 * back, so the cost per case is a function call, not a process.
 */
export class PythonOracle implements Oracle {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffered = '';
  private stderr = '';
  private exited: string | undefined;
  /** Batches sent and not yet answered, in order: the process answers them one after another. */
  private readonly pending: Array<{ resolve: (line: string) => void; reject: (error: Error) => void }> = [];

  private constructor(child: ChildProcessWithoutNullStreams) {
    this.child = child;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => this.received(chunk));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
    child.on('exit', (code, signal) => this.failAll(`the Python fuzz oracle exited (${signal ?? `code ${String(code)}`}): ${this.stderr.trim() || 'no output'}`));
    child.on('error', (error) => this.failAll(`the Python fuzz oracle could not run: ${error.message}`));
    // A write to a process that died fails here too; the exit handler reports why.
    child.stdin.on('error', () => undefined);
  }

  static start(options: PythonOracleOptions = {}): PythonOracle {
    const python = options.python ?? defaultPython();
    if (!existsSync(python)) throw new Error(`no Python at ${python}: run scripts/ensure-python.sh first`);
    const child = spawn(python, ['-X', 'utf8', fuzzOracleScript(), options.modulePath ?? modulePath()], { stdio: ['pipe', 'pipe', 'pipe'] });
    return new PythonOracle(child);
  }

  private failAll(reason: string): void {
    this.exited ??= reason;
    for (const waiting of this.pending.splice(0)) waiting.reject(new Error(this.exited));
  }

  private received(chunk: string): void {
    this.buffered += chunk;
    for (let newline = this.buffered.indexOf('\n'); newline !== -1; newline = this.buffered.indexOf('\n')) {
      const line = this.buffered.slice(0, newline);
      this.buffered = this.buffered.slice(newline + 1);
      this.pending.shift()?.resolve(line);
    }
  }

  /** Answers one batch. Batches may be queued: each is answered in the order it was sent. */
  async evaluate(cases: readonly FuzzCase[]): Promise<Outcome[]> {
    if (this.exited !== undefined) throw new Error(this.exited);
    const line = await new Promise<string>((resolve, reject) => {
      this.pending.push({ resolve, reject });
      this.child.stdin.write(`${JSON.stringify(cases.map((c) => [c.category, c.input]))}\n`);
    });
    const answers = JSON.parse(line) as Wire[];
    if (answers.length !== cases.length) throw new Error(`the Python fuzz oracle answered ${answers.length} of ${cases.length} cases`);
    return answers.map(outcomeOf);
  }

  /** Ends the process (closing its stdin ends its loop) and waits for it. */
  async close(): Promise<void> {
    if (this.exited !== undefined) return;
    await new Promise<void>((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.stdin.end();
    });
  }
}
