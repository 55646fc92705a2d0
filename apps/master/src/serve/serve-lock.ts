import { MasterRunnerError } from '@oduflow/master-runner';
import { openPrivateDir, type FileLock } from '@oduflow/receipt-store';
import { join } from 'node:path';

/*
 * One `serve` per file store: a second one would run a second relay and
 * poller over the same outbox and records, which the file store's locks make
 * safe but the design does not promise (several instances are what the
 * PostgreSQL store is for). So serve holds an exclusive, non-blocking flock
 * on locks/serve.lock for its whole life; the kernel drops it when the
 * process dies, however it dies. It also holds locks/store.lock shared, like
 * every store unit, so `migrate-store` (which takes it exclusively) cannot
 * run under a live service.
 */

export interface ServeLock {
  release(): void;
}

export function holdServeLock(storeRoot: string): ServeLock {
  const locks = openPrivateDir(join(storeRoot, 'locks'), { removeStaleTemps: false });
  const held: FileLock[] = [];
  const release = (): void => {
    for (const lock of held.reverse()) lock.release();
    locks.close();
  };
  try {
    const serve = locks.tryLockSync('serve.lock');
    if (serve === undefined) {
      throw new MasterRunnerError('store_busy', `another oduflow-master serve is running on the store ${storeRoot} (locks/serve.lock is held)`, {
        detail: 'lock_busy',
      });
    }
    held.push(serve);
    const store = locks.tryLockSync('store.lock', { shared: true });
    if (store === undefined) {
      throw new MasterRunnerError('store_busy', `migrate-store is running on the store ${storeRoot}; start serve after it ends`, { detail: 'lock_busy' });
    }
    held.push(store);
  } catch (error) {
    release();
    throw error;
  }
  return { release };
}
