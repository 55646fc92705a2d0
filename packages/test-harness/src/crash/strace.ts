import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseStrace, type Syscall } from './strace-parse.js';

/*
 * Recording a workload's file-system operations with strace rather than an
 * instrumented layer: strace sees the system calls the kernel really got,
 * whatever issued them (Python's os module, Node's fs, the receipt-store
 * addon, libuv), so nothing a wrapper forgot to wrap goes unrecorded, and the
 * production code needs no seam for it. Two ways in: a command strace starts
 * (the Python module), or this very process (the TypeScript stores, so the
 * code under test is the one vitest, and Stryker, loaded).
 */

const STRACE = '/usr/bin/strace';

/** Every call that can change a tree, plus stat()s (milestones) and process creation (refused). */
const TRACED = [
  'openat', 'open', 'creat', 'close', 'dup', 'dup2', 'dup3', 'fcntl',
  'write', 'pwrite64', 'writev', 'pwritev', 'pwritev2', 'ftruncate', 'truncate',
  'fchmod', 'fchmodat', 'chmod', 'fsync', 'fdatasync',
  'rename', 'renameat', 'renameat2', 'unlink', 'unlinkat', 'rmdir', 'mkdir', 'mkdirat',
  'link', 'linkat', 'symlink', 'symlinkat',
  'newfstatat', 'statx', 'stat', 'lstat', 'access', 'faccessat', 'faccessat2',
  'clone', 'clone3', 'fork', 'vfork',
].join(',');

const COMMON = ['-f', '-y', '-xx', '-s', '1048576', '-e', `trace=${TRACED}`];
const ATTACH_DEADLINE_MS = 15_000;

function assertStrace(): void {
  if (!existsSync(STRACE)) throw new Error(`${STRACE} is required by the crash-state enumeration (apt-get install strace)`);
}

export interface TracedCommand {
  readonly calls: Syscall[];
  readonly stdout: string;
}

/** Runs `argv` under strace; fails when it exits non-zero. */
export async function traceCommand(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<TracedCommand> {
  assertStrace();
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-strace-'));
  const out = join(dir, 'trace');
  try {
    const child = spawn(STRACE, [...COMMON, '--seccomp-bpf', '-o', out, '--', ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    if (code !== 0) throw new Error(`traced command ${argv.join(' ')} exited ${code}: ${stderr.slice(-2000)}`);
    return { calls: parseStrace(readFileSync(out, 'utf8')), stdout };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Runs `work` in this process with strace attached to it (every thread),
 * from before `work` starts until it settled. The tracer stops each traced
 * call until it has written it, so every call `work` made is in the trace.
 */
export async function traceSelf<T>(work: () => Promise<T>): Promise<{ result: T; calls: Syscall[] }> {
  assertStrace();
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-strace-'));
  const out = join(dir, 'trace');
  const child = spawn(STRACE, [...COMMON, '-o', out, '-p', String(process.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      let stderr = '';
      const timer = setTimeout(() => reject(new Error(`strace did not attach within ${ATTACH_DEADLINE_MS} ms: ${stderr}`)), ATTACH_DEADLINE_MS);
      child.on('error', reject);
      child.on('close', (code) => reject(new Error(`strace exited ${code} before attaching: ${stderr}`)));
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8');
        if (stderr.includes('attached')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    let result: T;
    try {
      result = await work();
    } finally {
      child.kill('SIGINT');
      await exited;
    }
    return { result, calls: parseStrace(readFileSync(out, 'utf8')) };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}
