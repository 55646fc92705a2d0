import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../src/exit-codes.js';
import { assertBuilt, cliEnv, jsonOf, type CliRun } from './support/cli.js';
import { spawnServe, writeTokensFile } from './serve/support/serve-process.js';
import { testTokensFile } from './serve/support/service-world.js';

/*
 * How an operator installs the CLI on a master host (apps/master/README.md,
 * "Installing on a master host"): `npm run pack:master` builds one tarball;
 * the host extracts it anywhere and runs `npm ci --omit=dev` in it. This test
 * does exactly that in a temporary directory outside the repository, with an
 * environment that names nothing in it, and runs the installed executable.
 */

const repo = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';

let scratch: string;
let prefix: string;
let bin: string;
let standIn: SaltApiStandIn | undefined;

/** Only what a host shell has: no npm_* or INIT_CWD from the npm run that started the tests. */
function hostEnv(): Record<string, string> {
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? scratch, TMPDIR: scratch };
}

function runInstalled(args: readonly string[], env: Readonly<Record<string, string>>): Promise<CliRun> {
  return new Promise((done, fail) => {
    const child = spawn(bin, [...args], { cwd: scratch, env: { ...hostEnv(), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', fail);
    child.on('close', (code, signal) => done({ code, signal, stdout, stderr }));
  });
}

beforeAll(() => {
  assertBuilt();
  scratch = mkdtempSync(join(tmpdir(), 'oduflow-install-'));
  chmodSync(scratch, 0o700);
  const tarball = execFileSync('bash', [join(repo, 'scripts', 'pack-master.sh'), '--no-build', '--out', join(scratch, 'out')], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .at(-1) as string;
  const host = join(scratch, 'opt');
  execFileSync('mkdir', ['-p', host]);
  execFileSync('tar', ['-xzf', tarball, '-C', host]);
  const [unpacked] = readdirSync(host);
  prefix = join(host, unpacked as string);
  execFileSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], { cwd: prefix, env: hostEnv(), stdio: 'pipe' });
  bin = join(prefix, 'node_modules', '.bin', 'oduflow-master');
}, 240_000);

afterAll(async () => {
  await standIn?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the pack:master artefact', () => {
  it('installs with npm ci outside the repository: our packages from the tarball, the addon built, nothing linked back', () => {
    expect(existsSync(join(prefix, 'node_modules', '@oduflow', 'receipt-store', 'build', 'Release', 'receipt_store.node'))).toBe(true);
    for (const entry of ['oduflow-master', '@oduflow/protocol', '@oduflow/receipt-store', '@oduflow/master-runner', '.bin/oduflow-master']) {
      expect(realpathSync(join(prefix, 'node_modules', entry)).startsWith(repo), entry).toBe(false);
    }
  });

  it('runs --help and real commands against a temporary store and salt-api', async () => {
    const help = await runInstalled(['--help'], {});
    expect(help.code).toBe(EXIT.ok);
    expect(help.stdout).toContain('migrate-store');

    standIn = await startSaltApiStandIn();
    const env = cliEnv(scratch, standIn);
    const dispatched = await runInstalled(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST, '--json'], env);
    expect(dispatched.code, dispatched.stderr).toBe(EXIT.ok);
    expect(jsonOf(dispatched)).toMatchObject({ outcome: 'published' });
    expect(standIn.publicationsOf(REQUEST)).toBe(1);
    expect(jsonOf(await runInstalled(['list', '--unresolved', '--json'], env))).toMatchObject({ records: [{ request_id: REQUEST, state: 'published' }] });
    expect(jsonOf(await runInstalled(['migrate-store', '--json'], env))).toMatchObject({ outcome: 'rechecked', records: 1, unresolved: 1 });

    // The service from the same install: it serves, and drains on SIGTERM.
    const serving = spawnServe({ ...hostEnv(), ...env, ODUFLOW_TOKENS_FILE: writeTokensFile(scratch, testTokensFile()) }, [], bin);
    const address = await serving.address;
    expect(await (await fetch(`${address}/readyz`)).json()).toMatchObject({ ready: true });
    serving.child.kill('SIGTERM');
    expect((await serving.exited).code).toBe(EXIT.ok);
  });

  it('holds back what the repository holds back for Node 20 (light-my-request 6.6, cookie 1)', () => {
    const version = (name: string): string => (JSON.parse(readFileSync(join(prefix, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
    expect(version('light-my-request')).toBe('6.6.0');
    expect(version('cookie')).toMatch(/^1\./);
  });
});

describe('the executable npm links in the repository', () => {
  it('is the committed launcher, which runs the built CLI', () => {
    const linked = join(repo, 'node_modules', '.bin', 'oduflow-master');
    expect(realpathSync(linked)).toBe(join(repo, 'apps', 'master', 'bin', 'oduflow-master.js'));
    expect(execFileSync(linked, ['--help'], { encoding: 'utf8' })).toContain('Usage: oduflow-master');
  });

  it('says to build first, and exits 1, when the CLI is not built', () => {
    // The launcher alone in a directory without dist/, as in a fresh clone before the build.
    const fresh = mkdtempSync(join(tmpdir(), 'oduflow-launcher-'));
    try {
      execFileSync('mkdir', ['-p', join(fresh, 'bin')]);
      execFileSync('cp', [join(repo, 'apps', 'master', 'bin', 'oduflow-master.js'), join(fresh, 'bin')]);
      execFileSync('cp', [join(repo, 'apps', 'master', 'package.json'), fresh]);
      let failure: { status?: number; stderr?: string } = {};
      try {
        execFileSync(process.execPath, [join(fresh, 'bin', 'oduflow-master.js'), '--help'], { encoding: 'utf8', stdio: 'pipe' });
      } catch (error) {
        failure = error as { status?: number; stderr?: string };
      }
      expect(failure.status).toBe(1);
      expect(failure.stderr).toContain('oduflow-master is not built');
      expect(failure.stderr).toContain('npx nx run oduflow-master:build');
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
