import {
  chmodSync,
  chownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RECEIPT_STORE_ERROR_CODES, ReceiptStoreError, isReceiptStoreErrorCode, openPrivateDir } from '../src/index.js';
import { isRoot, makeTempRoot, spawnNode, spawnPython, waitFor } from './helpers.js';

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

function mode(path: string): number {
  return lstatSync(path).mode & 0o7777;
}

function temps(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.startsWith('.tmp-'));
}

describe('atomic JSON files', () => {
  it('writes a JSON file atomically and reads the same value back', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    const value = { request_id: 'r-1', nested: { list: [1, 'two', null, true] }, unicode: 'žluťoučký' };
    dir.writeJsonAtomic('receipt.json', value);
    expect(dir.readJson('receipt.json')).toEqual(value);
    expect(readFileSync(join(root, 'store', 'receipt.json'), 'utf8')).toBe(JSON.stringify(value));
    expect(mode(join(root, 'store', 'receipt.json'))).toBe(0o600);
    expect(mode(join(root, 'store'))).toBe(0o700);
    expect(temps(join(root, 'store'))).toEqual([]);
    dir.close();
  });

  it('writes JSON text it is given verbatim, with the same no-replace rule, and refuses a text that is not a string', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    const text = '{"a":1,"b":[true,null,"x"]}';
    dir.writeJsonTextAtomic('given.json', text);
    expect(readFileSync(join(root, 'store', 'given.json'), 'utf8')).toBe(text);
    expect(dir.readJson('given.json')).toEqual({ a: 1, b: [true, null, 'x'] });
    expect(mode(join(root, 'store', 'given.json'))).toBe(0o600);
    expect(codeOf(() => dir.writeJsonTextAtomic('given.json', '{"a":2}'))).toBe('already_exists');
    dir.writeJsonTextAtomic('given.json', '{"a":2}', { replace: true });
    expect(dir.readJson('given.json')).toEqual({ a: 2 });
    expect(codeOf(() => dir.writeJsonTextAtomic('other.json', { a: 3 } as never))).toBe('malformed_json');
    expect(codeOf(() => dir.writeJsonTextAtomic('../escape.json', '{}'))).toBe('invalid_name');
    expect(dir.list()).toEqual(['given.json']);
    expect(temps(join(root, 'store'))).toEqual([]);
    dir.close();
  });

  it('refuses to replace an existing file unless replace is set, leaving the first content', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    dir.writeJsonAtomic('r', { first: true });
    expect(codeOf(() => dir.writeJsonAtomic('r', { second: true }))).toBe('already_exists');
    expect(codeOf(() => dir.writeJsonAtomic('r', { second: true }, { replace: false }))).toBe('already_exists');
    expect(dir.readJson('r')).toEqual({ first: true });
    expect(temps(join(root, 'store'))).toEqual([]);
  });

  it('replaces an existing file when replace is true', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    dir.writeJsonAtomic('r', { version: 1 });
    dir.writeJsonAtomic('r', { version: 2 }, { replace: true });
    expect(dir.readJson('r')).toEqual({ version: 2 });
    expect(dir.list()).toEqual(['r']);
  });

  it('reports not_found for a missing file, undefined from readJsonIfExists, and malformed_json for bytes that are not JSON', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    expect(codeOf(() => dir.readJson('missing'))).toBe('not_found');
    expect(dir.readJsonIfExists('missing')).toBeUndefined();
    writeFileSync(join(root, 'store', 'torn'), '{"half":', { mode: 0o600 });
    expect(codeOf(() => dir.readJson('torn'))).toBe('malformed_json');
    expect(codeOf(() => dir.writeJsonAtomic('nothing', undefined))).toBe('malformed_json');
    expect(dir.list()).toEqual(['torn']);
  });

  it('lists entry names sorted and without temporary files, and removes files', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    dir.writeJsonAtomic('b', 1);
    dir.writeJsonAtomic('a', 2);
    dir.subdir('c', { create: true }).close();
    const lock = dir.tryLockSync('lockfile');
    // A live writer's temporary file (held with flock) must stay out of the listing.
    writeFileSync(join(root, 'store', '.tmp-inflight'), '', { mode: 0o600 });
    expect(dir.list()).toEqual(['a', 'b', 'c', 'lockfile']);
    dir.remove('b');
    expect(dir.list()).toEqual(['a', 'c', 'lockfile']);
    expect(codeOf(() => dir.remove('b'))).toBe('not_found');
    lock?.release();
  });

  it('creates files 0600 and directories 0700 even when the umask would take bits away', () => {
    const previous = process.umask(0o277);
    try {
      const dir = openPrivateDir(join(root, 'a', 'b'), { create: true });
      dir.writeJsonAtomic('f', { ok: true });
      dir.subdir('sub', { create: true }).close();
      dir.tryLockSync('lock')?.release();
      expect(mode(join(root, 'a'))).toBe(0o700);
      expect(mode(join(root, 'a', 'b'))).toBe(0o700);
      expect(mode(join(root, 'a', 'b', 'sub'))).toBe(0o700);
      expect(mode(join(root, 'a', 'b', 'f'))).toBe(0o600);
      expect(mode(join(root, 'a', 'b', 'lock'))).toBe(0o600);
      expect(dir.readJson('f')).toEqual({ ok: true });
    } finally {
      process.umask(previous);
    }
  });

  it('fails with io_error once the handle is closed', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    dir.close();
    dir.close();
    expect(codeOf(() => dir.list())).toBe('io_error');
    expect(codeOf(() => dir.writeJsonAtomic('x', 1))).toBe('io_error');
  });
});

describe('temporary files', () => {
  it('removes the temporary file of a SIGKILLed writer when the directory is opened, keeping the last complete file', async () => {
    const storePath = join(root, 'store');
    openPrivateDir(storePath, { create: true }).close();
    const writer = `
      const { openPrivateDir } = await import(LIB);
      const dir = openPrivateDir(process.argv[1]);
      const big = 'x'.repeat(4 << 20);
      for (let i = 0; ; i++) {
        dir.writeJsonAtomic('receipt', { i, big }, { replace: true });
        if (i === 0) console.log('WROTE');
      }`;
    let leftover: string[] = [];
    // A kill can land between a rename and the next temp file; try again until one is caught mid-write.
    for (let attempt = 0; attempt < 20 && leftover.length === 0; attempt++) {
      const child = spawnNode(writer, [storePath]);
      await child.waitForLine('WROTE');
      await waitFor(() => temps(storePath).length > 0, 'a temporary file of the writer');
      await child.kill();
      expect((await child.exited).signal).toBe('SIGKILL');
      leftover = temps(storePath);
    }
    expect(leftover.length).toBe(1);
    const dir = openPrivateDir(storePath);
    expect(temps(storePath)).toEqual([]);
    const receipt = dir.readJson('receipt') as { i: number; big: string };
    expect(receipt.big.length).toBe(4 << 20);
    expect(Number.isInteger(receipt.i)).toBe(true);
    expect(dir.list()).toEqual(['receipt']);
  });

  it('never breaks a writer in another process when the directory is opened again and again meanwhile', async () => {
    const storePath = join(root, 'store');
    openPrivateDir(storePath, { create: true }).close();
    const writer = spawnNode(
      `const { openPrivateDir } = await import(LIB);
      const dir = openPrivateDir(process.argv[1]);
      for (let i = 0; i < 400; i++) dir.writeJsonAtomic('receipt', { i, pad: 'y'.repeat(20000) }, { replace: true });
      console.log('DONE');`,
      [storePath],
    );
    let opens = 0;
    let finished = false;
    void writer.exited.then(() => (finished = true));
    await waitFor(async () => {
      openPrivateDir(storePath).close(); // each open runs the stale temp clean-up
      opens += 1;
      await new Promise((next) => setImmediate(next));
      return finished;
    }, 'the writer to finish', 25_000);
    expect((await writer.exited).code).toBe(0);
    expect(writer.output()).toContain('DONE');
    expect(opens).toBeGreaterThan(10);
    expect((openPrivateDir(storePath).readJson('receipt') as { i: number }).i).toBe(399);
  });

  it('leaves a dead writer\'s temporary file alone when opened with removeStaleTemps: false, and removes it on a default open', () => {
    const storePath = join(root, 'store');
    openPrivateDir(storePath, { create: true }).subdir('sub', { create: true }).close();
    // Nobody holds a flock on these: they are what a SIGKILLed writer leaves.
    writeFileSync(join(storePath, '.tmp-dead'), '{', { mode: 0o600 });
    writeFileSync(join(storePath, 'sub', '.tmp-dead'), '{', { mode: 0o600 });
    const kept = openPrivateDir(storePath, { removeStaleTemps: false });
    kept.subdir('sub', { removeStaleTemps: false }).close();
    expect(temps(storePath)).toEqual(['.tmp-dead']);
    expect(temps(join(storePath, 'sub'))).toEqual(['.tmp-dead']);
    kept.subdir('sub').close();
    expect(temps(join(storePath, 'sub'))).toEqual([]);
    kept.close();
    openPrivateDir(storePath).close();
    expect(temps(storePath)).toEqual([]);
  });

  it('keeps a temporary file whose writer is still alive (it holds a flock on it)', async () => {
    const storePath = join(root, 'store');
    openPrivateDir(storePath, { create: true }).close();
    const tempPath = join(storePath, '.tmp-livewriter');
    const holder = spawnPython(
      `import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print('LOCKED', flush=True)
sys.stdin.read()`,
      [tempPath],
    );
    await holder.waitForLine('LOCKED');
    openPrivateDir(storePath).close();
    expect(temps(storePath)).toEqual(['.tmp-livewriter']);
    await holder.kill();
    openPrivateDir(storePath).close();
    expect(temps(storePath)).toEqual([]);
  });
});

describe('refusing unsafe paths', () => {
  it('refuses a symlink at the final name of a file, a lock and a directory, and never writes through it', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    const outside = join(root, 'outside');
    writeFileSync(outside, '{"secret":1}', { mode: 0o600 });
    mkdirSync(join(root, 'outside-dir'), { mode: 0o700 });
    symlinkSync(outside, join(root, 'store', 'receipt'));
    symlinkSync(join(root, 'outside-dir'), join(root, 'store', 'sub'));
    symlinkSync(join(root, 'outside-dir'), join(root, 'store-link'));

    expect(codeOf(() => dir.readJson('receipt'))).toBe('unsafe_path');
    expect(codeOf(() => dir.readJsonIfExists('receipt'))).toBe('unsafe_path');
    expect(codeOf(() => dir.writeJsonAtomic('receipt', { evil: true }))).toBe('already_exists');
    expect(codeOf(() => dir.tryLockSync('receipt'))).toBe('unsafe_path');
    expect(codeOf(() => dir.subdir('sub'))).toBe('unsafe_path');
    expect(codeOf(() => dir.subdir('sub', { create: true }))).toBe('unsafe_path');
    expect(codeOf(() => openPrivateDir(join(root, 'store-link')))).toBe('unsafe_path');
    expect(codeOf(() => openPrivateDir(join(root, 'store-link'), { create: true }))).toBe('unsafe_path');
    expect(readFileSync(outside, 'utf8')).toBe('{"secret":1}');
    expect(readdirSync(join(root, 'outside-dir'))).toEqual([]);
  });

  it('refuses a symlink at a middle component and creates nothing behind it', () => {
    mkdirSync(join(root, 'real'), { mode: 0o700 });
    symlinkSync(join(root, 'real'), join(root, 'link'));
    expect(codeOf(() => openPrivateDir(join(root, 'link', 'store')))).toBe('unsafe_path');
    expect(codeOf(() => openPrivateDir(join(root, 'link', 'store'), { create: true }))).toBe('unsafe_path');
    expect(readdirSync(join(root, 'real'))).toEqual([]);
  });

  it('refuses a file with a second hard link', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    dir.writeJsonAtomic('receipt', { ok: true });
    linkSync(join(root, 'store', 'receipt'), join(root, 'elsewhere'));
    expect(codeOf(() => dir.readJson('receipt'))).toBe('unsafe_path');
    expect(codeOf(() => dir.tryLockSync('receipt'))).toBe('unsafe_path');
  });

  it('refuses something that is not a regular file, such as a FIFO, without hanging', async () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    const mkfifo = spawnPython('import os, sys; os.mkfifo(sys.argv[1], 0o600); print("MADE", flush=True)', [
      join(root, 'store', 'pipe'),
    ]);
    await mkfifo.waitForLine('MADE');
    await mkfifo.exited;
    expect(codeOf(() => dir.readJson('pipe'))).toBe('unsafe_path');
    dir.subdir('d', { create: true }).close();
    expect(codeOf(() => dir.readJson('d'))).toBe('unsafe_path');
  });

  it('refuses a wrong mode at every level: ancestor, final directory, sub-directory, file and lock file', () => {
    const ancestor = join(root, 'anc');
    mkdirSync(join(ancestor, 'store'), { recursive: true, mode: 0o700 });
    chmodSync(ancestor, 0o777);
    expect(codeOf(() => openPrivateDir(join(ancestor, 'store')))).toBe('unsafe_path');
    chmodSync(ancestor, 0o775);
    expect(codeOf(() => openPrivateDir(join(ancestor, 'store')))).toBe('unsafe_path');
    chmodSync(ancestor, 0o1777); // sticky, like /tmp: accepted
    openPrivateDir(join(ancestor, 'store')).close();
    chmodSync(ancestor, 0o755); // not writable by others: accepted
    openPrivateDir(join(ancestor, 'store')).close();

    const storePath = join(ancestor, 'store');
    for (const wrong of [0o750, 0o755, 0o701, 0o1700, 0o600]) {
      chmodSync(storePath, wrong);
      expect(codeOf(() => openPrivateDir(storePath)), `final directory mode ${wrong.toString(8)}`).toBe('unsafe_path');
    }
    chmodSync(storePath, 0o700);
    const dir = openPrivateDir(storePath);

    mkdirSync(join(storePath, 'sub'), { mode: 0o711 });
    chmodSync(join(storePath, 'sub'), 0o711);
    expect(codeOf(() => dir.subdir('sub'))).toBe('unsafe_path');

    writeFileSync(join(storePath, 'file'), '{}', { mode: 0o644 });
    chmodSync(join(storePath, 'file'), 0o644);
    expect(codeOf(() => dir.readJson('file'))).toBe('unsafe_path');
    chmodSync(join(storePath, 'file'), 0o400);
    expect(codeOf(() => dir.readJson('file'))).toBe('unsafe_path');
    chmodSync(join(storePath, 'file'), 0o600);
    expect(dir.readJson('file')).toEqual({});

    writeFileSync(join(storePath, 'lock'), '', { mode: 0o640 });
    chmodSync(join(storePath, 'lock'), 0o640);
    expect(codeOf(() => dir.tryLockSync('lock'))).toBe('unsafe_path');
  });

  it('refuses a wrong owner at every level (uid 65534): ancestor, final directory, sub-directory, file and lock file', () => {
    // Handing files to a second uid needs root; without it this fails loudly rather than skipping.
    expect(isRoot, 'run the receipt-store tests as root (npm test does in CI)').toBe(true);
    const ancestor = join(root, 'anc');
    const storePath = join(ancestor, 'store');
    mkdirSync(storePath, { recursive: true, mode: 0o700 });
    chmodSync(ancestor, 0o755);
    chownSync(ancestor, 65534, 65534);
    expect(codeOf(() => openPrivateDir(storePath))).toBe('unsafe_path');
    chownSync(ancestor, 0, 0);
    openPrivateDir(storePath).close();

    chownSync(storePath, 65534, 65534);
    expect(codeOf(() => openPrivateDir(storePath))).toBe('unsafe_path');
    chownSync(storePath, 0, 0);
    const dir = openPrivateDir(storePath);

    dir.subdir('sub', { create: true }).close();
    chownSync(join(storePath, 'sub'), 65534, 65534);
    expect(codeOf(() => dir.subdir('sub'))).toBe('unsafe_path');

    dir.writeJsonAtomic('file', { ok: true });
    chownSync(join(storePath, 'file'), 65534, 65534);
    expect(codeOf(() => dir.readJson('file'))).toBe('unsafe_path');

    dir.tryLockSync('lock')?.release();
    chownSync(join(storePath, 'lock'), 65534, 65534);
    expect(codeOf(() => dir.tryLockSync('lock'))).toBe('unsafe_path');
  });

  it('keeps working in the original directory after its path is swapped for a symlink, and writes nothing into the attacker directory', () => {
    const storePath = join(root, 'store');
    const dir = openPrivateDir(storePath, { create: true });
    dir.writeJsonAtomic('before', { n: 1 });
    const attacker = join(root, 'attacker');
    mkdirSync(attacker, { mode: 0o700 });
    renameSync(storePath, join(root, 'store.moved'));
    symlinkSync(attacker, storePath);

    dir.writeJsonAtomic('after', { n: 2 });
    dir.writeJsonAtomic('before', { n: 3 }, { replace: true });
    dir.subdir('sub', { create: true }).writeJsonAtomic('deep', { n: 4 });
    dir.tryLockSync('lock')?.release();

    expect(readdirSync(attacker)).toEqual([]);
    expect(readdirSync(join(root, 'store.moved')).sort()).toEqual(['after', 'before', 'lock', 'sub']);
    expect(JSON.parse(readFileSync(join(root, 'store.moved', 'before'), 'utf8'))).toEqual({ n: 3 });
    expect(dir.readJson('after')).toEqual({ n: 2 });
    expect(dir.list()).toEqual(['after', 'before', 'lock', 'sub']);
    // A fresh open by path now meets the symlink and refuses it.
    expect(codeOf(() => openPrivateDir(storePath))).toBe('unsafe_path');
  });

  it('accepts a private directory created inside an existing trusted tree and keeps its ancestors untouched', () => {
    const before = statSync(root).mode;
    const dir = openPrivateDir(`${root}//new/./`.replace('/./', '/'), { create: true });
    expect(dir.path).toBe(join(root, 'new'));
    expect(statSync(root).mode).toBe(before);
  });
});

describe('names and errors', () => {
  it('refuses names that are not exactly one plain component', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    for (const bad of ['', '.', '..', 'a/b', '/abs', 'nul\0byte', '.tmp-reserved', 'x'.repeat(256)]) {
      expect(codeOf(() => dir.readJson(bad)), JSON.stringify(bad)).toBe('invalid_name');
      expect(codeOf(() => dir.writeJsonAtomic(bad, 1)), JSON.stringify(bad)).toBe('invalid_name');
      expect(codeOf(() => dir.subdir(bad, { create: true })), JSON.stringify(bad)).toBe('invalid_name');
      expect(codeOf(() => dir.tryLockSync(bad)), JSON.stringify(bad)).toBe('invalid_name');
      expect(codeOf(() => dir.remove(bad)), JSON.stringify(bad)).toBe('invalid_name');
    }
    expect(dir.list()).toEqual([]);
  });

  it('refuses relative paths and paths with "." or ".." components', () => {
    for (const bad of ['relative/store', '', `${root}/../store`, `${root}/./store`, `${root}/a\0b`]) {
      expect(codeOf(() => openPrivateDir(bad, { create: true })), JSON.stringify(bad)).toBe('invalid_name');
    }
  });

  it('exports its closed set of error codes and recognises its errors from any copy of the package', () => {
    expect(RECEIPT_STORE_ERROR_CODES).toEqual([
      'unsafe_path',
      'not_found',
      'already_exists',
      'lock_busy',
      'lock_timeout',
      'malformed_json',
      'invalid_name',
      'io_error',
    ]);
    expect(isReceiptStoreErrorCode('lock_busy')).toBe(true);
    expect(isReceiptStoreErrorCode('EAGAIN')).toBe(false);
    const error = new ReceiptStoreError('not_found', 'x');
    expect(error).toBeInstanceOf(Error);
    expect(ReceiptStoreError.isInstance(error)).toBe(true);
    const foreign = Object.assign(new Error('from another copy'), { [Symbol.for('oduflow.receipt-store.error')]: true });
    expect(ReceiptStoreError.isInstance(foreign)).toBe(true);
    expect(ReceiptStoreError.isInstance(new Error('plain'))).toBe(false);
    expect(ReceiptStoreError.isInstance(null)).toBe(false);
  });

  it('keeps the system error with code, errno and syscall as the cause of an io_error', () => {
    const dir = openPrivateDir(join(root, 'store'), { create: true });
    mkdirSync(join(root, 'store', 'adir'), { mode: 0o700 });
    try {
      dir.remove('adir');
      expect.unreachable();
    } catch (error) {
      expect(ReceiptStoreError.isInstance(error) && error.code).toBe('io_error');
      const cause = (error as Error).cause as { code: string; errno: number; syscall: string };
      expect(cause.code).toBe('EISDIR');
      expect(cause.errno).toBe(-21);
      expect(cause.syscall).toBe('unlinkat');
    }
  });
});
