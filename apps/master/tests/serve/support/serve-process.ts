import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI } from '../../support/cli.js';

/*
 * `oduflow-master serve` as a real child process (the built dist/cli.js, or
 * another entry such as the crash entry), on port 0: the address is read
 * from its "serving" log line. Its stderr (pino JSON lines) is kept for
 * assertions.
 */

export interface ServeProcess {
  readonly child: ChildProcess;
  /** The http://host:port it serves on, once its "serving" line is out; rejects if it exits first. */
  readonly address: Promise<string>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** The parsed JSON log lines so far. */
  lines(): Record<string, unknown>[];
  /** Resolves once a log line with this `msg` has been written. */
  logged(msg: string, deadlineMs?: number): Promise<Record<string, unknown>>;
}

export function spawnServe(env: Readonly<Record<string, string>>, args: readonly string[] = [], entry: string = CLI, entryArgs: readonly string[] = []): ServeProcess {
  const child = spawn(process.execPath, [entry, ...entryArgs, 'serve', '--port', '0', ...args], {
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  const waiters: { msg: string; resolve: (line: Record<string, unknown>) => void }[] = [];
  const parsed = (): Record<string, unknown>[] =>
    stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    const lines = parsed();
    for (const w of [...waiters]) {
      const line = lines.find((l) => l['msg'] === w.msg);
      if (line !== undefined) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  const logged = (msg: string, deadlineMs = 15_000): Promise<Record<string, unknown>> => {
    const found = parsed().find((l) => l['msg'] === msg);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`serve did not log "${msg}" in time; stderr:\n${stderr}\nstdout:\n${stdout}`)), deadlineMs);
      waiters.push({
        msg,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`serve exited before logging "${msg}"; stderr:\n${stderr}`));
      });
    });
  };
  const address = logged('serving').then((line) => String(line['address']));
  address.catch(() => undefined);
  return { child, address, exited, stderr: () => stderr, lines: parsed, logged };
}

/** Writes a tokens file (0600) and returns its path. */
export function writeTokensFile(dir: string, content: unknown): string {
  const path = join(dir, 'tokens.json');
  writeFileSync(path, JSON.stringify(content), { mode: 0o600 });
  chmodSync(path, 0o600);
  return path;
}
