import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ReceiptStoreError, writeFileAtomic } from '../src/index.js';
import { childBundle, makeTempRoot } from './helpers.js';

let root: string;
let cleanup: () => void;

beforeEach(() => {
  ({ root, cleanup } = makeTempRoot());
});
afterEach(() => cleanup());

function codeOf(action: () => unknown): string | undefined {
  try {
    action();
  } catch (error) {
    if (ReceiptStoreError.isInstance(error)) return error.code;
    throw error;
  }
  return undefined;
}

const temps = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('.tmp-'));

/**
 * Runs writeFileAtomic in a child Node process under strace and returns the
 * file-system calls that touched `dir` (strace -y prints each fd's path).
 */
function tracedWrite(dir: string, file: string, options: string): string[] {
  const script = `const { writeFileAtomic } = await import(${JSON.stringify(`file://${childBundle()}`)});
writeFileAtomic(${JSON.stringify(file)}, 'traced bytes', ${options});`;
  const trace = join(root, 'strace.out');
  const run = spawnSync(
    'strace',
    ['-f', '-qq', '-y', '-o', trace, '-e', 'trace=openat,mkdir,mkdirat,write,fchmod,fsync,fdatasync,rename,renameat,renameat2', process.execPath, '--input-type=module', '-e', script],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (run.error) throw new Error(`strace is required for this test and could not run: ${run.error.message}`);
  expect(run.status, run.stderr).toBe(0);
  return readFileSync(trace, 'utf8')
    .split('\n')
    .map((line) => line.replace(/^\d+\s+/, ''))
    .filter((line) => line.includes(dir) && !line.includes('strace.out'));
}

describe('writeFileAtomic', () => {
  it('writes the exact bytes with the exact mode, whatever the umask, and leaves no temporary file', () => {
    const path = join(root, 'served', 'module.py');
    mkdirSync(join(root, 'served'));
    const previous = process.umask(0o077);
    try {
      writeFileAtomic(path, Buffer.from([0, 1, 2, 255]), { mode: 0o644 });
    } finally {
      process.umask(previous);
    }
    expect(readFileSync(path).equals(Buffer.from([0, 1, 2, 255]))).toBe(true);
    expect(statSync(path).mode & 0o7777).toBe(0o644);
    writeFileAtomic(path, 'text\n');
    expect(readFileSync(path, 'utf8')).toBe('text\n');
    expect(statSync(path).mode & 0o7777).toBe(0o600);
    expect(temps(join(root, 'served'))).toEqual([]);
  });

  it('replaces a symlink at the path instead of writing through it', () => {
    const target = join(root, 'elsewhere');
    writeFileSync(target, 'untouched');
    const path = join(root, 'link');
    symlinkSync(target, path);
    writeFileAtomic(path, 'new', { mode: 0o644 });
    expect(lstatSync(path).isFile()).toBe(true);
    expect(readFileSync(path, 'utf8')).toBe('new');
    expect(readFileSync(target, 'utf8')).toBe('untouched');
  });

  it('creates missing parent directories with exactly the given mode only when asked', () => {
    const path = join(root, 'a', 'b', 'file');
    expect(codeOf(() => writeFileAtomic(path, 'x'))).toBe('not_found');
    mkdirSync(join(root, 'kept'), { mode: 0o700 });
    const previous = process.umask(0o077);
    try {
      writeFileAtomic(path, 'x', { mode: 0o644, dirMode: 0o755 });
      writeFileAtomic(join(root, 'kept', 'new', 'file'), 'y', { dirMode: 0o755 });
    } finally {
      process.umask(previous);
    }
    expect(readFileSync(path, 'utf8')).toBe('x');
    expect(statSync(join(root, 'a')).mode & 0o7777).toBe(0o755);
    expect(statSync(join(root, 'a', 'b')).mode & 0o7777).toBe(0o755);
    // an existing directory keeps its mode
    expect(statSync(join(root, 'kept')).mode & 0o7777).toBe(0o700);
    expect(statSync(join(root, 'kept', 'new')).mode & 0o7777).toBe(0o755);
  });

  it('refuses a relative path, the root directory and the reserved temporary prefix as invalid_name', () => {
    expect(codeOf(() => writeFileAtomic('relative/file', 'x'))).toBe('invalid_name');
    expect(codeOf(() => writeFileAtomic('/', 'x'))).toBe('invalid_name');
    expect(codeOf(() => writeFileAtomic(join(root, '.tmp-mine'), 'x'))).toBe('invalid_name');
    expect(codeOf(() => writeFileAtomic(`${root}/../x`, 'x'))).toBe('invalid_name');
  });

  it('fails with io_error and removes its temporary file when the rename cannot happen', () => {
    mkdirSync(join(root, 'taken'));
    writeFileSync(join(root, 'taken', 'keep'), 'k');
    expect(codeOf(() => writeFileAtomic(join(root, 'taken'), 'x'))).toBe('io_error');
    expect(temps(root)).toEqual([]);
    expect(readFileSync(join(root, 'taken', 'keep'), 'utf8')).toBe('k');
  });

  it('fsyncs the temporary file before the rename and the directory after it (strace)', () => {
    const dir = join(root, 'tree');
    mkdirSync(dir);
    const calls = tracedWrite(dir, join(dir, 'file'), '{ mode: 0o644 }');
    const index = (pattern: RegExp) => calls.findIndex((line) => pattern.test(line));
    const create = index(/^openat\(.*"\.tmp-[0-9a-f]{24}", O_WRONLY\|O_CREAT\|O_EXCL\|O_NOFOLLOW/);
    const write = index(/^write\(\d+<[^>]*\/\.tmp-[0-9a-f]{24}>, "traced bytes"/);
    const fsyncFile = index(/^fsync\(\d+<[^>]*\/\.tmp-[0-9a-f]{24}>\)/);
    const rename = index(/^renameat2\(\d+<[^>]*\/tree>, "\.tmp-[0-9a-f]{24}", \d+<[^>]*\/tree>, "file", 0\)/);
    const fsyncDir = calls.findIndex((line, i) => i > rename && new RegExp(`^fsync\\(\\d+<${dir}>\\)`).test(line));
    expect([create, write, fsyncFile, rename].every((i) => i >= 0), calls.join('\n')).toBe(true);
    expect(create).toBeLessThan(write);
    expect(write).toBeLessThan(fsyncFile);
    expect(fsyncFile).toBeLessThan(rename);
    expect(fsyncDir, calls.join('\n')).toBeGreaterThan(rename);
  });

  it('fsyncs the parent of every directory it creates (strace)', () => {
    const calls = tracedWrite(root, join(root, 'x', 'y', 'file'), '{ dirMode: 0o755 }');
    const synced = calls.filter((line) => line.startsWith('fsync(')).map((line) => /<([^>]*)>/.exec(line)?.[1]);
    expect(synced, calls.join('\n')).toEqual(expect.arrayContaining([root, join(root, 'x'), join(root, 'x', 'y')]));
    expect(synced.indexOf(root)).toBeLessThan(synced.indexOf(join(root, 'x')));
  });
});
