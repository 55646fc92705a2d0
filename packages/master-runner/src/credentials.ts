import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { MasterRunnerError } from './errors.js';

/*
 * A secret (salt-api's or PostgreSQL's password, the service's tokens file)
 * lives in a file that only the runner's user can read: a regular file (not
 * a symlink), owned by the effective user, mode 0600 or stricter, one link.
 * It is opened with O_NOFOLLOW (and O_NONBLOCK, so a FIFO put in its place
 * cannot hang the open) and checked again through the open descriptor, so a
 * swap between the check and the read is caught. Errors name the path and
 * the rule broken, never the content.
 */

const MAX_PASSWORD_BYTES = 4096;

/**
 * Reads the whole of `path` after checking the file is private. `what` names
 * the file in errors; a file over `maxBytes` is refused unread.
 */
export function readPrivateFile(path: string, what: string, maxBytes: number): string {
  const insecure = (rule: string): MasterRunnerError => new MasterRunnerError('credentials_insecure', `${what} ${path} ${rule}`);
  const unreadable = (why: string, cause?: unknown): MasterRunnerError =>
    new MasterRunnerError('credentials_unreadable', `${what} ${path} ${why}`, { cause });
  if (!isAbsolute(path)) throw new MasterRunnerError('config_invalid', `the ${what} must be an absolute path`);
  let link;
  try {
    link = lstatSync(path);
  } catch (error) {
    throw unreadable('cannot be read', error);
  }
  if (link.isSymbolicLink()) throw insecure('is a symlink');
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw unreadable('cannot be opened', error);
  }
  try {
    const st = fstatSync(fd);
    if (st.ino !== link.ino || st.dev !== link.dev) throw insecure('changed while it was opened');
    if (!st.isFile()) throw insecure('is not a regular file');
    if (st.nlink !== 1) throw insecure('has more than one link');
    if (st.uid !== process.geteuid?.()) throw insecure('is not owned by the user running the master');
    if ((st.mode & 0o077) !== 0) throw insecure(`has mode ${(st.mode & 0o777).toString(8)}; it must be 0600 or stricter`);
    if (st.size > maxBytes) throw unreadable(`is larger than ${maxBytes} bytes`);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads the password in `path` after checking the file is private. `what`
 * names the file in errors (default "salt-api password file").
 */
export function readPrivatePasswordFile(path: string, what = 'salt-api password file'): string {
  // One trailing newline is how editors and `echo` end files; it is not part of the password.
  const password = readPrivateFile(path, what, MAX_PASSWORD_BYTES).replace(/\r?\n$/, '');
  if (password === '') throw new MasterRunnerError('credentials_unreadable', `${what} ${path} is empty`);
  return password;
}
