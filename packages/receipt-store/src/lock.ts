import { closeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ReceiptStoreError, ioError, systemErrorCode } from './errors.js';
import { native } from './native.js';

/** A kernel flock(2) lock held through one open file description. */
export interface FileLock {
  /** Unlocks and closes the lock file. Idempotent. The lock file itself stays (it is never deleted while in use). */
  release(): void;
  readonly released: boolean;
}

export interface LockOptions {
  /**
   * How long to wait for the lock, in milliseconds. 0 or omitted: do not wait
   * (`lock_busy` when it is held). Positive: `lock_timeout` when it is still
   * held after that long. `Infinity` waits for ever.
   */
  wait?: number;
  /** A shared (LOCK_SH) lock instead of an exclusive (LOCK_EX) one. */
  shared?: boolean;
}

/** Longest pause between two attempts of a waiting lock. */
const MAX_BACKOFF_MS = 50;

class KernelFileLock implements FileLock {
  #fd: number;
  #released = false;

  constructor(fd: number) {
    this.#fd = fd;
  }

  get released(): boolean {
    return this.#released;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    const fd = this.#fd;
    this.#fd = -1;
    try {
      native().flock(fd, native().constants.LOCK_UN);
    } finally {
      // Closing the last fd of the open file description drops the lock anyway.
      closeSync(fd);
    }
  }
}

/** One non-blocking attempt: true when locked, false when someone else holds it. */
function attempt(fd: number, shared: boolean, display: string): boolean {
  const { LOCK_SH, LOCK_EX, LOCK_NB } = native().constants;
  try {
    native().flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB);
    return true;
  } catch (error) {
    if (systemErrorCode(error) === 'EAGAIN' || systemErrorCode(error) === 'EWOULDBLOCK') return false;
    throw ioError(`cannot lock ${display}`, error);
  }
}

export function checkWait(wait: unknown): number {
  if (wait === undefined) return 0;
  if (typeof wait !== 'number' || Number.isNaN(wait) || wait < 0) {
    throw new TypeError('lock option "wait" must be a non-negative number of milliseconds');
  }
  return wait;
}

/** Takes the lock on `fd` without blocking; returns undefined when it is held elsewhere. Owns `fd` either way. */
export function tryLockFd(fd: number, shared: boolean, display: string): FileLock | undefined {
  let locked = false;
  try {
    locked = attempt(fd, shared, display);
  } finally {
    if (!locked) closeSync(fd);
  }
  return locked ? new KernelFileLock(fd) : undefined;
}

/**
 * Takes the lock on `fd`, waiting up to `wait` ms. Owns `fd`: it is closed on failure.
 *
 * Waiting polls flock(LOCK_NB) with a capped exponential backoff instead of
 * calling a blocking flock(). A blocking flock() cannot run on the main thread
 * (it would freeze the event loop), and on the libuv thread pool it would tie
 * up one of its four threads for the whole wait (starving fs, dns and crypto
 * work) and could not be cancelled at the deadline: the thread would stay in
 * flock() until the holder lets go, and then own a lock nobody waits for any
 * more. Polling keeps the loop and the pool free and makes the deadline exact;
 * the cost is up to MAX_BACKOFF_MS of extra latency and no FIFO fairness
 * between waiters, which is fine for locks held for short critical sections.
 */
export async function lockFd(fd: number, wait: number, shared: boolean, display: string): Promise<FileLock> {
  let owned = true;
  try {
    const deadline = performance.now() + wait;
    let backoff = 1;
    for (;;) {
      if (attempt(fd, shared, display)) {
        owned = false;
        return new KernelFileLock(fd);
      }
      if (wait === 0) throw new ReceiptStoreError('lock_busy', `the lock ${display} is held by another holder`);
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new ReceiptStoreError('lock_timeout', `the lock ${display} was still held after ${wait} ms`);
      }
      await sleep(Math.min(backoff, remaining));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  } finally {
    if (owned) closeSync(fd);
  }
}
