import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { POSTGRES_BIN_DIR } from '../postgres.js';

/*
 * The machine facts BENCHMARKS.md prints once for the whole run. Only what
 * explains a number (CPU, cores, RAM, kernel, the versions that ran, the
 * file system fsync went to); no host name, no user, no path.
 */

/** The first line a command prints, or `unknown` (a tool that is not installed is a fact too, not an error). */
function firstLine(command: string, args: readonly string[]): string {
  const run = spawnSync(command, args, { encoding: 'utf8', timeout: 20_000 });
  if (run.status !== 0) return 'unknown';
  const line = `${run.stdout}${run.stderr}`.trim().split('\n')[0]?.trim();
  return line === undefined || line === '' ? 'unknown' : line;
}

/** The file system type of the mount `dir` is on (ext4, tmpfs, ...), as the mount table names it. */
export function filesystemOf(dir: string): string {
  // `stat -f` cannot tell ext4 from ext2/ext3 (one magic number); findmnt reads the mount table.
  return firstLine('findmnt', ['-n', '-o', 'FSTYPE', '--target', dir]);
}

/** Label → value, in display order. `repoRoot` locates the workspace's Python (.venv); `benchDir` is where the file benchmarks write. */
export function collectMachineFacts(repoRoot: string, benchDir: string): [string, string][] {
  const python = join(repoRoot, '.venv', 'bin', 'python');
  const hasPython = existsSync(python);
  const cpu = cpus();
  return [
    ['CPU', cpu[0]?.model.trim() ?? 'unknown'],
    ['cores', String(cpu.length)],
    ['RAM', `${(totalmem() / 2 ** 30).toFixed(1)} GiB`],
    ['kernel', `Linux ${release()}`],
    ['Node.js', process.version],
    ['Python', hasPython ? firstLine(python, ['--version']) : 'unknown'],
    ['Salt', hasPython ? firstLine(python, ['-c', 'import salt.version; print(salt.version.__version__)']) : 'unknown'],
    ['PostgreSQL', firstLine(join(POSTGRES_BIN_DIR, 'postgres'), ['--version'])],
    ['file system of the bench directory (os.tmpdir())', `${filesystemOf(benchDir)} (fsync reaches the disk unless this says tmpfs)`],
  ];
}
