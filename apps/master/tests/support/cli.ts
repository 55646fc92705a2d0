import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writePasswordFile } from '../../../../packages/master-runner/tests/support/harness.js';

/*
 * Runs the built `oduflow-master` executable (dist/cli.js) as a real child
 * process. Asynchronous on purpose: the salt-api stand-in lives in the test
 * process and must keep answering while the CLI runs.
 */

export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface CliRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsup\` in apps/master before these tests`);
}

export function runCli(args: readonly string[], env: Readonly<Record<string, string>>, entry: string = CLI): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...env },
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

/** The JSON document a `--json` run printed on stdout. */
export function jsonOf(run: CliRun): Record<string, unknown> {
  try {
    return JSON.parse(run.stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`stdout is not JSON (exit ${run.code}, signal ${run.signal}): ${run.stdout}\nstderr: ${run.stderr}`);
  }
}

/** The environment a CLI test runs with: a private store in `dir` and the stand-in's salt-api credentials. */
export function cliEnv(dir: string, standIn: { url: string; username: string; password: string }): Record<string, string> {
  return {
    ODUFLOW_STORE: join(dir, 'store'),
    ODUFLOW_SALT_API_URL: standIn.url,
    ODUFLOW_SALT_API_USER: standIn.username,
    ODUFLOW_SALT_API_PASSWORD_FILE: writePasswordFile(dir, standIn.password),
    ODUFLOW_SALT_API_EAUTH: 'sharedsecret',
    ODUFLOW_CALL_TIMEOUT_MS: '3000',
  };
}

