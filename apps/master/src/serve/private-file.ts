import { MasterRunnerError } from '@oduflow/master-runner';
import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync } from 'node:fs';
import { isAbsolute } from 'node:path';

/*
 * A configuration file that holds secrets' digests (the tokens file): a
 * regular file, not a symlink, one link, owned by the user running the
 * service, mode 0600 or stricter — the same rules as the salt-api password
 * file. Opened with O_NOFOLLOW and checked again through the descriptor, so
 * a swap between the check and the read is caught. Errors name the path and
 * the rule broken, never the content.
 */

export function readPrivateFile(path: string, what: string, maxBytes: number): string {
  if (!isAbsolute(path)) throw new MasterRunnerError('config_invalid', `the ${what} must be an absolute path`);
  const insecure = (rule: string): MasterRunnerError => new MasterRunnerError('credentials_insecure', `${what} ${path} ${rule}`);
  const unreadable = (why: string, cause?: unknown): MasterRunnerError =>
    new MasterRunnerError('credentials_unreadable', `${what} ${path} ${why}`, { cause });
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
