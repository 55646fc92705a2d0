import { lstatSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type PrivateDir, ReceiptStoreError, openPrivateDir } from '../src/index.js';
import { type Child, makeTempRoot, spawnNode, spawnPython } from './helpers.js';

let root: string;
let cleanup: () => void;
let dir: PrivateDir;
const children: Child[] = [];

beforeEach(() => {
  ({ root, cleanup } = makeTempRoot());
  dir = openPrivateDir(join(root, 'store'), { create: true });
});
afterEach(async () => {
  await Promise.all(children.splice(0).map((child) => child.kill()));
  dir.close();
  cleanup();
});

async function codeOf(action: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await action();
  } catch (error) {
    if (ReceiptStoreError.isInstance(error)) return error.code;
    throw error;
  }
  return undefined;
}

/** python3 holder/trier: argv = path, ex|sh, hold|try. Prints LOCKED or BUSY <errno>. */
const PYTHON_LOCKER = `import fcntl, os, sys
path, kind, action = sys.argv[1:4]
fd = os.open(path, os.O_RDWR)
try:
    fcntl.flock(fd, (fcntl.LOCK_EX if kind == 'ex' else fcntl.LOCK_SH) | fcntl.LOCK_NB)
except BlockingIOError as e:
    print('BUSY', e.errno, flush=True)
    sys.exit(0)
print('LOCKED', flush=True)
if action == 'hold':
    sys.stdin.read()`;

/** Node holder/trier through the library itself: argv = dir, name, ex|sh, hold|try. */
const NODE_LOCKER = `
const { openPrivateDir } = await import(LIB);
const [dirPath, name, kind, action] = process.argv.slice(1);
const dir = openPrivateDir(dirPath);
const lock = dir.tryLockSync(name, { shared: kind === 'sh' });
if (lock === undefined) { console.log('BUSY'); process.exit(0); }
console.log('LOCKED');
if (action === 'hold') process.stdin.resume(); else lock.release();`;

function python(kind: 'ex' | 'sh', action: 'hold' | 'try'): Child {
  const child = spawnPython(PYTHON_LOCKER, [join(root, 'store', 'the.lock'), kind, action]);
  children.push(child);
  return child;
}

function node(kind: 'ex' | 'sh', action: 'hold' | 'try'): Child {
  const child = spawnNode(NODE_LOCKER, [join(root, 'store'), 'the.lock', kind, action]);
  children.push(child);
  return child;
}

describe('flock locks', () => {
  it('creates the lock file 0600 and reports lock_busy for a non-blocking lock that is held', async () => {
    const held = await dir.lock('the.lock');
    expect(lstatSync(join(root, 'store', 'the.lock')).mode & 0o7777).toBe(0o600);
    // A second open file description, even in this process, does not get the lock.
    expect(dir.tryLockSync('the.lock')).toBeUndefined();
    expect(await codeOf(() => dir.lock('the.lock'))).toBe('lock_busy');
    expect(await codeOf(() => dir.lock('the.lock', { wait: 0 }))).toBe('lock_busy');
    held.release();
    const again = dir.tryLockSync('the.lock');
    expect(again).toBeDefined();
    again?.release();
  });

  it('waits for a blocking lock and gives up with lock_timeout at the deadline', async () => {
    const held = await dir.lock('the.lock');
    const started = performance.now();
    expect(await codeOf(() => dir.lock('the.lock', { wait: 150 }))).toBe('lock_timeout');
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(149);
    expect(elapsed).toBeLessThan(2_000);
    held.release();
  });

  it('hands a waiting lock over as soon as the holder releases it, without blocking the event loop', async () => {
    const held = await dir.lock('the.lock');
    let ticks = 0;
    const ticker = setInterval(() => (ticks += 1), 1);
    setTimeout(() => held.release(), 100);
    const started = performance.now();
    const lock = await dir.lock('the.lock', { wait: 10_000 });
    clearInterval(ticker);
    expect(held.released).toBe(true);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(ticks).toBeGreaterThan(5); // timers kept firing during the wait
    lock.release();
  });

  it('makes release idempotent and reports released', async () => {
    const lock = await dir.lock('the.lock');
    expect(lock.released).toBe(false);
    lock.release();
    lock.release();
    expect(lock.released).toBe(true);
  });

  it('rejects a negative or non-numeric wait', async () => {
    await expect(dir.lock('the.lock', { wait: -1 })).rejects.toThrow(TypeError);
    await expect(dir.lock('the.lock', { wait: Number.NaN })).rejects.toThrow(TypeError);
  });

  it('keeps locks held after the directory handle is closed', async () => {
    const other = openPrivateDir(join(root, 'store'));
    const lock = await other.lock('the.lock');
    other.close();
    expect(dir.tryLockSync('the.lock')).toBeUndefined();
    lock.release();
    dir.tryLockSync('the.lock')?.release();
  });
});

describe('flock locks across processes', () => {
  it('contends with another Node process in both directions', async () => {
    dir.tryLockSync('the.lock')?.release(); // create the lock file

    const holder = node('ex', 'hold');
    await holder.waitForLine('LOCKED');
    expect(await codeOf(() => dir.lock('the.lock'))).toBe('lock_busy');
    expect(await codeOf(() => dir.lock('the.lock', { wait: 50 }))).toBe('lock_timeout');
    await holder.kill();

    const mine = await dir.lock('the.lock');
    const trier = node('ex', 'try');
    await trier.waitForLine('BUSY');
    mine.release();
    const second = node('ex', 'try');
    await second.waitForLine('LOCKED');
  });

  it('contends with a Python fcntl.flock in both directions', async () => {
    dir.tryLockSync('the.lock')?.release();

    const holder = python('ex', 'hold');
    await holder.waitForLine('LOCKED');
    expect(dir.tryLockSync('the.lock')).toBeUndefined();
    expect(await codeOf(() => dir.lock('the.lock', { wait: 50 }))).toBe('lock_timeout');
    await holder.kill();

    const mine = await dir.lock('the.lock');
    const trier = python('ex', 'try');
    expect(await trier.waitForLine('BUSY')).toBe('BUSY 11'); // EAGAIN
    mine.release();
    await python('ex', 'try').waitForLine('LOCKED');
  });

  it('gets the lock at once when a Node or Python holder is SIGKILLed', async () => {
    dir.tryLockSync('the.lock')?.release();
    for (const start of [() => node('ex', 'hold'), () => python('ex', 'hold')]) {
      const holder = start();
      await holder.waitForLine('LOCKED');
      expect(dir.tryLockSync('the.lock')).toBeUndefined();
      await holder.kill();
      expect((await holder.exited).signal).toBe('SIGKILL');
      // No waiting, no staleness timeout: the kernel released it with the process.
      const lock = dir.tryLockSync('the.lock');
      expect(lock).toBeDefined();
      lock?.release();
    }
  });

  it('a SIGKILLed holder lets a waiting lock through while it waits', async () => {
    dir.tryLockSync('the.lock')?.release();
    const holder = python('ex', 'hold');
    await holder.waitForLine('LOCKED');
    const waiting = dir.lock('the.lock', { wait: 10_000 });
    void holder.kill();
    const lock = await waiting;
    expect(lock.released).toBe(false);
    lock.release();
  });

  it('lets shared holders in together and keeps an exclusive lock out, both ways', async () => {
    dir.tryLockSync('the.lock')?.release();

    const sharedPython = python('sh', 'hold');
    await sharedPython.waitForLine('LOCKED');
    const mineShared = await dir.lock('the.lock', { shared: true });
    const sharedNode = node('sh', 'hold');
    await sharedNode.waitForLine('LOCKED');
    expect(dir.tryLockSync('the.lock', { shared: false })).toBeUndefined();
    expect(await python('ex', 'try').waitForLine('BUSY')).toBe('BUSY 11');
    await node('ex', 'try').waitForLine('BUSY');
    mineShared.release();
    await sharedPython.kill();
    await sharedNode.kill();

    const mineExclusive = await dir.lock('the.lock');
    expect(await python('sh', 'try').waitForLine('BUSY')).toBe('BUSY 11');
    await node('sh', 'try').waitForLine('BUSY');
    mineExclusive.release();
    await python('sh', 'try').waitForLine('LOCKED');
  });
});
