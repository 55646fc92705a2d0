import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runDirs, scratchDir } from './support/fixtures.js';
import { childBundle } from './support/job-process.js';

/*
 * The order of durable writes, seen by strace in a real runner process:
 * every directory the envelope makes has its parent fsynced; the run
 * directory is fsynced before the first file is written into it; every
 * checkpoint file is temp → write → fsync(file) → renameat2 → fsync(dir).
 */

let root: string;
let remove: () => void;

beforeEach(() => {
  ({ dir: root, remove } = scratchDir('job-envelope-strace-'));
});
afterEach(() => remove());

/** Runs the child job under strace and returns its file-system calls that touch `under` (strace -y prints each fd's path). */
function tracedJob(workspace: string, under: string): string[] {
  const trace = join(root, 'strace.out');
  const job = JSON.stringify({ workspace, scratch: join(root, 'scratch') });
  const run = spawnSync(
    'strace',
    ['-f', '-qq', '-y', '-o', trace, '-e', 'trace=openat,mkdir,mkdirat,write,fsync,fdatasync,rename,renameat,renameat2', process.execPath, childBundle(), job],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (run.error) throw new Error(`strace is required for this test and could not run: ${run.error.message}`);
  expect(run.status, run.stdout + run.stderr).toBe(0);
  return readFileSync(trace, 'utf8')
    .split('\n')
    .map((line) => line.replace(/^\d+\s+/, ''))
    .filter((line) => line.includes(under));
}

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('the durable write order of a run (strace)', () => {
  it('fsyncs the parent of every directory it creates, and the run directory before its first file', () => {
    const workspace = join(root, 'ws');
    const calls = tracedJob(workspace, root);
    const [runId] = runDirs(workspace);
    const runDir = join(workspace, 'runs', runId as string);
    const at = (pattern: RegExp, from = 0): number => calls.findIndex((line, i) => i >= from && pattern.test(line));
    for (const [parent, name] of [
      [root, 'ws'],
      [workspace, 'runs'],
      [workspace, 'locks'],
      [join(workspace, 'runs'), runId as string],
    ] as const) {
      const made = at(new RegExp(`^mkdirat\\(\\d+<${escape(parent)}>, "${escape(name)}", 0700\\) = 0`));
      expect(made, `mkdirat ${name}\n${calls.join('\n')}`).toBeGreaterThanOrEqual(0);
      expect(at(new RegExp(`^fsync\\(\\d+<${escape(parent)}>\\) = 0`), made), `fsync of the parent of ${name}`).toBeGreaterThan(made);
    }
    const runMade = at(new RegExp(`^mkdirat\\(\\d+<${escape(join(workspace, 'runs'))}>, "${runId}"`));
    const runSynced = at(new RegExp(`^fsync\\(\\d+<${escape(runDir)}>\\) = 0`), runMade);
    const firstFile = at(new RegExp(`^openat\\(\\d+<${escape(runDir)}>, "\\.tmp-`));
    expect(runSynced).toBeGreaterThan(runMade);
    expect(firstFile).toBeGreaterThan(runSynced);
  });

  it('writes every checkpoint file as temp, write, fsync, renameat2, then fsyncs the directory', () => {
    const workspace = join(root, 'ws');
    const calls = tracedJob(workspace, root);
    const [runId] = runDirs(workspace);
    const runDir = join(workspace, 'runs', runId as string);
    const renames = calls
      .map((line, index) => ({ line, index, match: new RegExp(`^renameat2\\(\\d+<${escape(runDir)}>, "(\\.tmp-[0-9a-f]+)", \\d+<${escape(runDir)}>, "([^"]+)", (\\w+)\\) = 0`).exec(line) }))
      .filter((r) => r.match !== null);
    const names = renames.map((r) => r.match?.[2]);
    // start, 3 × (before, saveState, after), report, terminal header
    expect(names).toEqual([
      'job.json',
      ...['stage-00000.json', 'stage-00001.json', 'stage-00002.json'].flatMap((n) => [n, n, n]),
      'report.json',
      'job.json',
    ]);
    expect(renames[0]?.match?.[3]).toBe('RENAME_NOREPLACE'); // a run's first header never replaces one
    renames.forEach(({ index, match }, position) => {
      const temp = escape(`${runDir}/${match?.[1] as string}`);
      const created = calls.findIndex((line) => new RegExp(`^openat\\(\\d+<${escape(runDir)}>, "${escape(match?.[1] as string)}", O_WRONLY\\|O_CREAT\\|O_EXCL\\|O_NOFOLLOW`).test(line));
      const written = calls.findIndex((line) => new RegExp(`^write\\(\\d+<${temp}>`).test(line));
      const fileSynced = calls.findIndex((line) => new RegExp(`^fsync\\(\\d+<${temp}>\\) = 0`).test(line));
      const next = renames[position + 1]?.index ?? calls.length;
      const dirSynced = calls.findIndex((line, i) => i > index && i < next && new RegExp(`^fsync\\(\\d+<${escape(runDir)}>\\) = 0`).test(line));
      expect([created, written, fileSynced].every((i) => i >= 0), calls.join('\n')).toBe(true);
      expect(created).toBeLessThan(written);
      expect(written).toBeLessThan(fileSynced);
      expect(fileSynced).toBeLessThan(index);
      expect(dirSynced, `directory fsync after renaming ${match?.[2] as string}`).toBeGreaterThan(index);
    });
  });
});
