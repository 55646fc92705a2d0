import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, fchmodSync, fsyncSync, mkdirSync, writeSync } from 'node:fs';
import { posix } from 'node:path';
import { ReceiptStoreError, ioError, systemErrorCode } from './errors.js';
import { TEMP_PREFIX, checkName, splitAbsolutePath } from './names.js';
import { native } from './native.js';

export interface WriteFileAtomicOptions {
  /** Exact permission bits of the written file (the umask does not apply). Default 0o600. */
  mode?: number;
  /**
   * Create missing parent directories (like mkdir -p) with exactly this mode
   * (the umask does not apply). Each directory created is made durable in its
   * parent by an fsync. Directories that exist are left as they are. Default:
   * a missing parent is `not_found`.
   */
  dirMode?: number;
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed: nothing to release
  }
}

function fsyncPath(path: string): void {
  const { AT_FDCWD, O_RDONLY, O_DIRECTORY } = native().constants;
  const fd = native().openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY, 0);
  try {
    fsyncSync(fd);
  } finally {
    closeQuietly(fd);
  }
}

/**
 * mkdir -p, then, top down, for every directory it created: chmod to the
 * exact mode and an fsync of its parent (a new directory entry is durable
 * only once its parent is synced).
 */
function makeParents(dir: string, mode: number): void {
  let first: string | undefined;
  try {
    first = mkdirSync(dir, { recursive: true, mode });
  } catch (error) {
    throw ioError(`cannot create the directory ${dir}`, error);
  }
  if (first === undefined) return;
  try {
    for (let created = first; ; ) {
      chmodSync(created, mode);
      fsyncPath(posix.dirname(created));
      if (created === dir) break;
      created = posix.join(created, dir.slice(created.length + 1).split('/')[0] as string);
    }
  } catch (error) {
    throw ioError(`cannot set up the new directories of ${dir}`, error);
  }
}

function openDir(dir: string): number {
  const { AT_FDCWD, O_RDONLY, O_DIRECTORY } = native().constants;
  try {
    return native().openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0);
  } catch (error) {
    if (systemErrorCode(error) === 'ENOENT') {
      throw new ReceiptStoreError('not_found', `the directory ${dir} does not exist`, { cause: error });
    }
    throw ioError(`cannot open the directory ${dir}`, error);
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset);
}

/**
 * Writes `content` to the absolute path `path` atomically and durably, for
 * files that are not part of a private store (a Salt file_roots tree, say):
 * exclusive temp file `.tmp-<random>` created O_NOFOLLOW in the same
 * directory → write → fchmod to `mode` → fsync(file) → renameat2 over `path`
 * (replacing it; a symlink there is replaced, never followed) → fsync(dir).
 * Readers see the old bytes or the new, never a mix, also after a crash or a
 * power loss. The parent directory is opened once and every step works
 * relative to that descriptor. Parent directories are ordinary ones: no
 * owner or mode checks (use `openPrivateDir` for those). A crash before the
 * rename can leave a `.tmp-*` file behind, which nothing here removes (the
 * directory may be shared with other tools).
 */
export function writeFileAtomic(path: string, content: Uint8Array | string, options: WriteFileAtomicOptions = {}): void {
  const components = splitAbsolutePath(path);
  const name = components.at(-1);
  if (name === undefined) throw new ReceiptStoreError('invalid_name', 'the path of a file must name a file, not /');
  checkName(name);
  const dir = `/${components.slice(0, -1).join('/')}`;
  const display = posix.join(dir, name);
  const mode = options.mode ?? 0o600;
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  if (options.dirMode !== undefined) makeParents(dir, options.dirMode);

  const dirFd = openDir(dir);
  try {
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = native().constants;
    const temp = `${TEMP_PREFIX}${randomBytes(12).toString('hex')}`;
    let fd: number;
    try {
      fd = native().openat(dirFd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode & 0o777);
    } catch (error) {
      throw ioError(`cannot create a temporary file in ${dir}`, error);
    }
    let renamed = false;
    try {
      try {
        writeAll(fd, bytes);
        fchmodSync(fd, mode); // exact bits: the umask applied at creation
        fsyncSync(fd);
      } catch (error) {
        throw ioError(`cannot write ${display}`, error);
      }
      try {
        native().renameat2(dirFd, temp, dirFd, name, 0);
        renamed = true;
      } catch (error) {
        throw ioError(`cannot rename the temporary file to ${display}`, error);
      }
    } finally {
      closeQuietly(fd);
      if (!renamed) {
        try {
          native().unlinkat(dirFd, temp, 0);
        } catch {
          // best effort: the write already failed and says why
        }
      }
    }
    try {
      fsyncSync(dirFd);
    } catch (error) {
      throw ioError(`cannot fsync the directory ${dir}`, error);
    }
  } finally {
    closeQuietly(dirFd);
  }
}
