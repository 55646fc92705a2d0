import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { MAX_HIGH_DATA_BYTES } from '@oduflow/protocol';
import { MasterRunnerError } from '@oduflow/master-runner';

/**
 * Reads custom high data from a file. The text must be canonical JSON; one
 * trailing newline (what editors add) is dropped, since canonical JSON never
 * ends with one. Nothing of the content ever appears in an error.
 *
 * Opened O_NONBLOCK (a FIFO or a device never blocks the open) and O_NOFOLLOW
 * (a symlink is refused, like the password file); then only a regular file of
 * at most the high data limit is read.
 */
export function readStateDataFile(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') {
      throw new MasterRunnerError('invalid_input', `the state data file ${path} is a symlink`, { detail: 'invalid_high_data' });
    }
    throw new MasterRunnerError('invalid_input', `cannot read the state data file ${path}`, { detail: 'invalid_high_data' });
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) {
      throw new MasterRunnerError('invalid_input', `the state data file ${path} is not a regular file`, { detail: 'invalid_high_data' });
    }
    // The limit plus the one trailing newline that is dropped.
    if (stat.size > MAX_HIGH_DATA_BYTES + 1) {
      throw new MasterRunnerError('invalid_input', `the state data file ${path} is larger than ${MAX_HIGH_DATA_BYTES} bytes`, {
        detail: 'high_data_too_large',
      });
    }
    // Read one byte past the limit so an oversized file is recognised without reading all of it.
    const buffer = Buffer.alloc(MAX_HIGH_DATA_BYTES + 2);
    let length = 0;
    for (;;) {
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0 || length + n >= buffer.length) {
        length += n;
        break;
      }
      length += n;
    }
    let text = buffer.subarray(0, length).toString('utf8');
    if (text.endsWith('\n')) text = text.slice(0, -1);
    return text;
  } finally {
    closeSync(fd);
  }
}
