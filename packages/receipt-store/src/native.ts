import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { ReceiptStoreError } from './errors.js';

/** The addon built from native/receipt_store.c (see scripts/build-native.cjs). */
export interface NativeBinding {
  /** openat(2); O_CLOEXEC is always added. Returns the new fd. */
  openat(dirfd: number, name: string, flags: number, mode: number): number;
  mkdirat(dirfd: number, name: string, mode: number): void;
  unlinkat(dirfd: number, name: string, flags: number): void;
  /** renameat2(2); flags may be RENAME_NOREPLACE (fails with EEXIST) or 0 (plain rename). */
  renameat2(olddirfd: number, oldname: string, newdirfd: number, newname: string, flags: number): void;
  /** flock(2). Throws EAGAIN (`code`) when LOCK_NB is given and the lock is held elsewhere. */
  flock(fd: number, operation: number): void;
  /** Entry names of an open directory, without '.' and '..'. */
  readdir(dirfd: number): string[];
  readonly constants: {
    readonly AT_FDCWD: number;
    readonly AT_REMOVEDIR: number;
    readonly O_RDONLY: number;
    readonly O_WRONLY: number;
    readonly O_RDWR: number;
    readonly O_CREAT: number;
    readonly O_EXCL: number;
    readonly O_NOFOLLOW: number;
    readonly O_DIRECTORY: number;
    readonly O_NONBLOCK: number;
    readonly O_CLOEXEC: number;
    readonly LOCK_SH: number;
    readonly LOCK_EX: number;
    readonly LOCK_NB: number;
    readonly LOCK_UN: number;
    readonly RENAME_NOREPLACE: number;
  };
}

/** Where the install script puts the addon, relative to src/ and dist/ alike. */
const ADDON_URL = new URL('../build/Release/receipt_store.node', import.meta.url);

let cached: NativeBinding | undefined;

/** Loads the addon on first use, so importing the package never fails by itself. */
export function native(): NativeBinding {
  if (cached !== undefined) return cached;
  if (process.platform !== 'linux') {
    throw new ReceiptStoreError('io_error', `@oduflow/receipt-store works on Linux only (this is ${process.platform})`);
  }
  const addonPath = fileURLToPath(ADDON_URL);
  try {
    cached = createRequire(import.meta.url)(addonPath) as NativeBinding;
  } catch (error) {
    throw new ReceiptStoreError(
      'io_error',
      `cannot load the native addon ${addonPath}; rebuild it with "npm rebuild @oduflow/receipt-store"`,
      { cause: error },
    );
  }
  return cached;
}
