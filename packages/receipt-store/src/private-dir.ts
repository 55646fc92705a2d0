import { randomBytes } from 'node:crypto';
import { closeSync, fchmodSync, fstatSync, fsyncSync, readFileSync, writeFileSync, type Stats } from 'node:fs';
import { ReceiptStoreError, ioError, systemErrorCode } from './errors.js';
import { type FileLock, type LockOptions, checkWait, lockFd, tryLockFd } from './lock.js';
import { TEMP_PREFIX, checkName, splitAbsolutePath } from './names.js';
import { native } from './native.js';

export interface PrivateDirOptions {
  /** Create missing directories (mode 0700, owned by the effective user). Default false. */
  create?: boolean;
  /**
   * Remove temporary files left by dead writers when the directory is opened
   * (default true). That clean-up lists the whole directory, so a caller that
   * opens a directory of many entries often passes false and removes stale
   * temporary files in a maintenance step of its own: they are never read
   * (list() leaves them out) and cost only disk space.
   */
  removeStaleTemps?: boolean;
}

export interface WriteJsonOptions {
  /** Replace an existing file (rename). Default false: `already_exists` when the name is taken (renameat2 RENAME_NOREPLACE). */
  replace?: boolean;
}

/**
 * A private directory, pinned by an open file descriptor: every operation
 * works relative to that descriptor, so renaming the directory's path or
 * swapping a parent for a symlink after opening cannot redirect it.
 */
export interface PrivateDir {
  /** The path it was opened at (for messages; operations never resolve it again). */
  readonly path: string;
  /** Opens (or with `create`, makes) one sub-directory with the same checks as the final directory of openPrivateDir. */
  subdir(name: string, options?: PrivateDirOptions): PrivateDir;
  /** Reads a JSON file. `not_found`, `unsafe_path` (symlink, not a regular file, nlink != 1, other owner, mode not 0600), `malformed_json`. */
  readJson(name: string): unknown;
  /** Like readJson, but undefined when the file does not exist. */
  readJsonIfExists(name: string): unknown;
  /**
   * Writes JSON.stringify(value) atomically: exclusive 0600 temp file, write,
   * fsync, renameat2 (RENAME_NOREPLACE unless `replace`), fsync of the directory.
   * Readers see the old content or the new, never a mix, also after a crash.
   */
  writeJsonAtomic(name: string, value: unknown, options?: WriteJsonOptions): void;
  /**
   * writeJsonAtomic for a caller that already holds the value's JSON text
   * (e.g. its canonical serialization), so it is not serialized twice. The
   * text is written as given: readJson of the file is `malformed_json` if it
   * was not JSON.
   */
  writeJsonTextAtomic(name: string, text: string, options?: WriteJsonOptions): void;
  /** Entry names, sorted, without temporary files. */
  list(): string[];
  /** Removes a file (not a directory); `not_found` if it is not there. */
  remove(name: string): void;
  /** Takes a kernel flock on the lock file `name` (created 0600 if missing). `lock_busy` / `lock_timeout`. */
  lock(name: string, options?: LockOptions): Promise<FileLock>;
  /** One non-blocking attempt: the lock, or undefined when it is held elsewhere. */
  tryLockSync(name: string, options?: Pick<LockOptions, 'shared'>): FileLock | undefined;
  /** Closes the directory descriptor. Locks taken from it stay held until released. Idempotent. */
  close(): void;
}

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;
/** Retries of an atomic write whose temporary file was removed by a concurrent opener. */
const WRITE_ATTEMPTS = 5;

function euid(): number {
  const id = process.geteuid?.();
  if (id === undefined) throw new ReceiptStoreError('io_error', 'no effective user id on this platform');
  return id;
}

function fstat(fd: number, display: string): Stats {
  try {
    return fstatSync(fd);
  } catch (error) {
    throw ioError(`cannot stat ${display}`, error);
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already closed or never valid: nothing to release
  }
}

function fsyncDir(fd: number, display: string): void {
  try {
    fsyncSync(fd);
  } catch (error) {
    throw ioError(`cannot fsync the directory ${display}`, error);
  }
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/**
 * Rule for existing ancestors (every directory above the final one, up to the
 * first one this call creates): a real directory (opened O_NOFOLLOW), owned by
 * root or by us, and not writable by group or other unless the sticky bit is
 * set. Anyone else who could write to an ancestor could rename the next
 * component away and put their own directory or symlink there before we open
 * it; an owner other than root or us could chmod it to allow that. The sticky
 * bit (/tmp) stops others renaming or deleting entries they do not own, and
 * the next component must itself pass this rule or the private rule, so it is
 * ours or root's.
 */
function checkAncestor(st: Stats, display: string): void {
  if (!st.isDirectory()) throw new ReceiptStoreError('unsafe_path', `${display} is not a directory`);
  if (st.uid !== 0 && st.uid !== euid()) {
    throw new ReceiptStoreError('unsafe_path', `${display} is owned by uid ${st.uid}, not by root or the current user`);
  }
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    throw new ReceiptStoreError(
      'unsafe_path',
      `${display} (mode ${octal(st.mode)}) is writable by group or other without the sticky bit`,
    );
  }
}

/** The store directories themselves: ours, mode 0700 exactly. */
function checkPrivateDir(st: Stats, display: string): void {
  if (!st.isDirectory()) throw new ReceiptStoreError('unsafe_path', `${display} is not a directory`);
  if (st.uid !== euid()) {
    throw new ReceiptStoreError('unsafe_path', `${display} is owned by uid ${st.uid}, not by the current user (${euid()})`);
  }
  if ((st.mode & 0o7777) !== DIR_MODE) {
    throw new ReceiptStoreError('unsafe_path', `${display} has mode ${octal(st.mode)}, expected 0700`);
  }
}

/** Files in the store: regular, one link, ours, mode 0600 exactly. */
function checkPrivateFile(st: Stats, display: string): void {
  if (!st.isFile()) throw new ReceiptStoreError('unsafe_path', `${display} is not a regular file`);
  if (st.nlink !== 1) {
    throw new ReceiptStoreError('unsafe_path', `${display} has ${st.nlink} hard links, expected exactly 1`);
  }
  if (st.uid !== euid()) {
    throw new ReceiptStoreError('unsafe_path', `${display} is owned by uid ${st.uid}, not by the current user (${euid()})`);
  }
  if ((st.mode & 0o7777) !== FILE_MODE) {
    throw new ReceiptStoreError('unsafe_path', `${display} has mode ${octal(st.mode)}, expected 0600`);
  }
}

/** Opens one directory entry as a directory, never following a symlink. */
function openDirAt(parentFd: number, name: string, display: string): number {
  const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = native().constants;
  try {
    return native().openat(parentFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  } catch (error) {
    const code = systemErrorCode(error);
    // O_DIRECTORY|O_NOFOLLOW on a symlink gives ENOTDIR (on some kernels ELOOP).
    if (code === 'ELOOP' || code === 'ENOTDIR') {
      throw new ReceiptStoreError('unsafe_path', `${display} is a symlink or not a directory`, { cause: error });
    }
    if (code === 'ENOENT') throw new ReceiptStoreError('not_found', `${display} does not exist`, { cause: error });
    throw ioError(`cannot open the directory ${display}`, error);
  }
}

/**
 * Opens the private directory `name` under `parentFd`, creating it (0700) when
 * asked. Returns its fd, checked with the private rule.
 */
function openPrivateChild(parentFd: number, name: string, display: string, create: boolean): number {
  let created = false;
  let fd: number;
  try {
    fd = openDirAt(parentFd, name, display);
  } catch (error) {
    if (!create || !ReceiptStoreError.isInstance(error) || error.code !== 'not_found') throw error;
    try {
      native().mkdirat(parentFd, name, DIR_MODE);
      created = true;
    } catch (mkdirError) {
      // EEXIST: someone made it meanwhile; it is then checked like any existing directory.
      if (systemErrorCode(mkdirError) !== 'EEXIST') throw ioError(`cannot create the directory ${display}`, mkdirError);
    }
    fd = openDirAt(parentFd, name, display);
  }
  try {
    let st = fstat(fd, display);
    if (created && st.isDirectory() && st.uid === euid() && (st.mode & 0o7777) !== DIR_MODE) {
      // The umask may have taken bits from 0700; we made it, so set it exactly.
      fchmodSync(fd, DIR_MODE);
      st = fstat(fd, display);
    }
    checkPrivateDir(st, display);
    if (created) fsyncDir(parentFd, `the parent of ${display}`);
    return fd;
  } catch (error) {
    closeQuietly(fd);
    throw error;
  }
}

/**
 * Removes temporary files left by crashed writers. A live writer holds an
 * exclusive flock on its temporary file from creation to rename, so a file
 * whose lock we can take belongs to a dead writer (the kernel dropped its
 * lock) and is removed; one we cannot lock is in use and is left alone.
 */
function removeStaleTemps(dirFd: number, display: string): void {
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, LOCK_EX, LOCK_NB } = native().constants;
  let names: string[];
  try {
    names = native().readdir(dirFd);
  } catch (error) {
    throw ioError(`cannot list ${display}`, error);
  }
  for (const name of names) {
    if (!name.startsWith(TEMP_PREFIX)) continue;
    let fd: number;
    try {
      fd = native().openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    } catch (error) {
      const code = systemErrorCode(error);
      if (code === 'ENOENT') continue; // renamed or removed meanwhile
      if (code !== 'ELOOP') throw ioError(`cannot open the temporary file ${display}/${name}`, error);
      unlinkIfPresent(dirFd, name, display); // a symlink: removing the link touches nothing else
      continue;
    }
    try {
      try {
        native().flock(fd, LOCK_EX | LOCK_NB);
      } catch (error) {
        if (systemErrorCode(error) === 'EAGAIN') continue; // a live writer
        throw ioError(`cannot lock the temporary file ${display}/${name}`, error);
      }
      if (fstat(fd, `${display}/${name}`).isDirectory()) continue; // not one of ours
      unlinkIfPresent(dirFd, name, display);
    } finally {
      closeQuietly(fd);
    }
  }
}

function unlinkIfPresent(dirFd: number, name: string, display: string): void {
  try {
    native().unlinkat(dirFd, name, 0);
  } catch (error) {
    if (systemErrorCode(error) !== 'ENOENT') throw ioError(`cannot remove ${display}/${name}`, error);
  }
}

class PinnedPrivateDir implements PrivateDir {
  readonly path: string;
  #fd: number;

  constructor(path: string, fd: number) {
    this.path = path;
    this.#fd = fd;
  }

  #dirFd(): number {
    if (this.#fd < 0) throw new ReceiptStoreError('io_error', `the directory handle for ${this.path} is closed`);
    return this.#fd;
  }

  #display(name: string): string {
    return this.path === '/' ? `/${name}` : `${this.path}/${name}`;
  }

  subdir(name: string, options: PrivateDirOptions = {}): PrivateDir {
    checkName(name);
    const display = this.#display(name);
    const fd = openPrivateChild(this.#dirFd(), name, display, options.create === true);
    try {
      if (options.removeStaleTemps !== false) removeStaleTemps(fd, display);
    } catch (error) {
      closeQuietly(fd);
      throw error;
    }
    return new PinnedPrivateDir(display, fd);
  }

  readJson(name: string): unknown {
    checkName(name);
    const display = this.#display(name);
    const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = native().constants;
    let fd: number;
    try {
      // O_NONBLOCK: a FIFO planted under the name must not hang the open; it is refused below.
      fd = native().openat(this.#dirFd(), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    } catch (error) {
      const code = systemErrorCode(error);
      if (code === 'ENOENT') throw new ReceiptStoreError('not_found', `${display} does not exist`, { cause: error });
      if (code === 'ELOOP') throw new ReceiptStoreError('unsafe_path', `${display} is a symlink`, { cause: error });
      if (ReceiptStoreError.isInstance(error)) throw error;
      throw ioError(`cannot open ${display}`, error);
    }
    let text: string;
    try {
      checkPrivateFile(fstat(fd, display), display);
      text = readFileSync(fd, 'utf8');
    } catch (error) {
      if (ReceiptStoreError.isInstance(error)) throw error;
      throw ioError(`cannot read ${display}`, error);
    } finally {
      closeQuietly(fd);
    }
    try {
      return JSON.parse(text) as unknown;
    } catch (error) {
      throw new ReceiptStoreError('malformed_json', `${display} does not hold valid JSON`, { cause: error });
    }
  }

  readJsonIfExists(name: string): unknown {
    try {
      return this.readJson(name);
    } catch (error) {
      if (ReceiptStoreError.isInstance(error) && error.code === 'not_found') return undefined;
      throw error;
    }
  }

  writeJsonAtomic(name: string, value: unknown, options: WriteJsonOptions = {}): void {
    checkName(name);
    const display = this.#display(name);
    const text: unknown = JSON.stringify(value);
    if (typeof text !== 'string') {
      throw new ReceiptStoreError('malformed_json', `the value for ${display} has no JSON representation`);
    }
    this.#writeTextAtomic(name, display, text, options);
  }

  writeJsonTextAtomic(name: string, text: string, options: WriteJsonOptions = {}): void {
    checkName(name);
    const display = this.#display(name);
    // A caller in plain JavaScript may pass anything.
    const given: unknown = text;
    if (typeof given !== 'string') throw new ReceiptStoreError('malformed_json', `the text for ${display} is not a string`);
    this.#writeTextAtomic(name, display, text, options);
  }

  #writeTextAtomic(name: string, display: string, text: string, options: WriteJsonOptions): void {
    const dirFd = this.#dirFd();
    const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, LOCK_EX, LOCK_NB, RENAME_NOREPLACE } = native().constants;
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const temp = `${TEMP_PREFIX}${randomBytes(12).toString('hex')}`;
      let fd: number;
      try {
        fd = native().openat(dirFd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, FILE_MODE);
      } catch (error) {
        throw ioError(`cannot create a temporary file in ${this.path}`, error);
      }
      let published = false;
      let retry = false;
      try {
        try {
          // Held until close: tells removeStaleTemps in other processes that this writer is alive.
          native().flock(fd, LOCK_EX | LOCK_NB);
        } catch (error) {
          // EAGAIN: an opener's clean-up locked it between our create and lock, and will remove it.
          if (systemErrorCode(error) === 'EAGAIN') {
            retry = true;
            continue;
          }
          throw ioError(`cannot lock the temporary file in ${this.path}`, error);
        }
        try {
          if ((fstatSync(fd).mode & 0o7777) !== FILE_MODE) fchmodSync(fd, FILE_MODE); // the umask may have removed bits
          writeFileSync(fd, text, 'utf8');
          fsyncSync(fd);
        } catch (error) {
          throw ioError(`cannot write ${display}`, error);
        }
        try {
          native().renameat2(dirFd, temp, dirFd, name, options.replace === true ? 0 : RENAME_NOREPLACE);
          published = true;
        } catch (error) {
          const code = systemErrorCode(error);
          if (code === 'EEXIST') {
            throw new ReceiptStoreError('already_exists', `${display} already exists`, { cause: error });
          }
          if (code === 'ENOENT') {
            // Our temporary file was removed under us (see above); write again under a new name.
            retry = true;
            continue;
          }
          throw ioError(`cannot rename the temporary file to ${display}`, error);
        }
      } finally {
        closeQuietly(fd);
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- `retry` is set before a `continue` in the try, which flow analysis does not carry here
        if (!published && !retry) unlinkIfPresentQuietly(dirFd, temp);
      }
      fsyncDir(dirFd, this.path);
      return;
    }
    throw new ReceiptStoreError('io_error', `temporary files in ${this.path} kept disappearing while writing ${display}`);
  }

  list(): string[] {
    let names: string[];
    try {
      names = native().readdir(this.#dirFd());
    } catch (error) {
      if (ReceiptStoreError.isInstance(error)) throw error;
      throw ioError(`cannot list ${this.path}`, error);
    }
    return names.filter((name) => !name.startsWith(TEMP_PREFIX)).sort();
  }

  remove(name: string): void {
    checkName(name);
    const display = this.#display(name);
    const dirFd = this.#dirFd();
    try {
      native().unlinkat(dirFd, name, 0);
    } catch (error) {
      if (systemErrorCode(error) === 'ENOENT') {
        throw new ReceiptStoreError('not_found', `${display} does not exist`, { cause: error });
      }
      throw ioError(`cannot remove ${display}`, error);
    }
    fsyncDir(dirFd, this.path);
  }

  async lock(name: string, options: LockOptions = {}): Promise<FileLock> {
    const wait = checkWait(options.wait);
    const fd = this.#openLockFile(name);
    return lockFd(fd, wait, options.shared === true, this.#display(name));
  }

  tryLockSync(name: string, options: Pick<LockOptions, 'shared'> = {}): FileLock | undefined {
    const fd = this.#openLockFile(name);
    return tryLockFd(fd, options.shared === true, this.#display(name));
  }

  /** Opens (creating 0600 if missing) a lock file, refusing symlinks and anything not private. */
  #openLockFile(name: string): number {
    checkName(name);
    const display = this.#display(name);
    const dirFd = this.#dirFd();
    const { O_RDONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = native().constants;
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      let fd: number;
      let created = false;
      try {
        fd = native().openat(dirFd, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, FILE_MODE);
        created = true;
      } catch (createError) {
        if (systemErrorCode(createError) !== 'EEXIST') throw ioError(`cannot create the lock file ${display}`, createError);
        try {
          fd = native().openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
        } catch (error) {
          const code = systemErrorCode(error);
          if (code === 'ENOENT') continue; // removed between the two opens: try again
          if (code === 'ELOOP') throw new ReceiptStoreError('unsafe_path', `${display} is a symlink`, { cause: error });
          throw ioError(`cannot open the lock file ${display}`, error);
        }
      }
      try {
        let st = fstat(fd, display);
        if (created && (st.mode & 0o7777) !== FILE_MODE) {
          fchmodSync(fd, FILE_MODE);
          st = fstat(fd, display);
        }
        checkPrivateFile(st, display);
        return fd;
      } catch (error) {
        closeQuietly(fd);
        if (ReceiptStoreError.isInstance(error)) throw error;
        throw ioError(`cannot prepare the lock file ${display}`, error);
      }
    }
    throw new ReceiptStoreError('io_error', `the lock file ${display} kept disappearing while being opened`);
  }

  close(): void {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    this.#fd = -1;
    closeSync(fd);
  }
}

function unlinkIfPresentQuietly(dirFd: number, name: string): void {
  try {
    native().unlinkat(dirFd, name, 0);
  } catch {
    // best effort: a crash-style leftover is removed by the next open
  }
}

/**
 * Opens the absolute path `absPath` one component at a time from '/', each
 * with O_DIRECTORY|O_NOFOLLOW relative to the previous one's fd. Existing
 * ancestors must pass checkAncestor; every directory this call creates and
 * the final directory must be owned by the effective user with mode 0700.
 * Stale temporary files in the final directory are removed (unless
 * `removeStaleTemps: false`). The returned
 * handle is pinned to the final directory's fd.
 */
export function openPrivateDir(absPath: string, options: PrivateDirOptions = {}): PrivateDir {
  const components = splitAbsolutePath(absPath);
  const create = options.create === true;
  const { AT_FDCWD, O_RDONLY, O_DIRECTORY } = native().constants;
  let fd: number;
  try {
    fd = native().openat(AT_FDCWD, '/', O_RDONLY | O_DIRECTORY, 0);
  } catch (error) {
    throw ioError('cannot open /', error);
  }
  let display = '/';
  try {
    if (components.length === 0) {
      checkPrivateDir(fstat(fd, display), display);
    } else {
      checkAncestor(fstat(fd, display), display);
    }
    let creating = false;
    for (let index = 0; index < components.length; index++) {
      const name = components[index] as string;
      display = `/${components.slice(0, index + 1).join('/')}`;
      const last = index === components.length - 1;
      let child: number;
      if (last || creating) {
        child = openPrivateChild(fd, name, display, create);
      } else {
        try {
          child = openDirAt(fd, name, display);
        } catch (error) {
          if (!create || !ReceiptStoreError.isInstance(error) || error.code !== 'not_found') throw error;
          creating = true; // from here down, every directory is made by us and must be private
          child = openPrivateChild(fd, name, display, create);
        }
        if (!creating) {
          try {
            checkAncestor(fstat(child, display), display);
          } catch (error) {
            closeQuietly(child);
            throw error;
          }
        }
      }
      closeQuietly(fd);
      fd = child;
    }
    if (options.removeStaleTemps !== false) removeStaleTemps(fd, display);
  } catch (error) {
    closeQuietly(fd);
    throw error;
  }
  return new PinnedPrivateDir(display, fd);
}
