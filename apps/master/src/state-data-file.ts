import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { MAX_HIGH_DATA_BYTES } from '@oduflow/protocol';
import { MasterRunnerError } from '@oduflow/master-runner';

/**
 * Reads custom high data from a file. The text must be canonical JSON; one
 * trailing newline (what editors add) is dropped, since canonical JSON never
 * ends with one. Nothing of the content ever appears in an error.
 */
export function readStateDataFile(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    throw new MasterRunnerError('invalid_input', `cannot read the state data file ${path}`, { detail: 'invalid_high_data' });
  }
  try {
    if (!fstatSync(fd).isFile()) {
      throw new MasterRunnerError('invalid_input', `the state data file ${path} is not a regular file`, { detail: 'invalid_high_data' });
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
