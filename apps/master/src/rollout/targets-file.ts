import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { MAX_ROLLOUT_TARGETS, MasterRunnerError } from '@oduflow/master-runner';
import { isMinionId } from '@oduflow/protocol';

/*
 * The targets of a rollout: one minion id per line, from a file or from
 * standard input (`-`). Blank lines and `#` comments are ignored, and so is
 * the whitespace around an id. A bad line is named by its number, never by
 * its content. The list is canonicalized (sorted, each minion once) by the
 * library, so the order of the file does not matter.
 *
 * A file is opened like the state data file: O_NOFOLLOW (a symlink is
 * refused) and O_NONBLOCK (a FIFO or a device never blocks the open), and
 * only a regular file of bounded size is read.
 */

/** A minion id line is ~45 bytes; this leaves room for comments. */
const MAX_TARGETS_BYTES = 16 * 1024 * 1024;

function invalid(message: string): never {
  throw new MasterRunnerError('invalid_input', message, { detail: 'invalid_minion_id' });
}

function parseTargets(text: string, source: string): string[] {
  const targets: string[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (!isMinionId(line)) invalid(`line ${index + 1} of ${source} is not a minion id (client-<uuid>)`);
    targets.push(line);
  });
  if (targets.length > MAX_ROLLOUT_TARGETS) {
    throw new MasterRunnerError('invalid_input', `${source} lists more than ${MAX_ROLLOUT_TARGETS} targets`, { detail: 'too_many_targets' });
  }
  if (targets.length === 0) throw new MasterRunnerError('invalid_input', `${source} lists no target`, { detail: 'no_targets' });
  return targets;
}

function tooLarge(source: string): never {
  throw new MasterRunnerError('invalid_input', `${source} is larger than ${MAX_TARGETS_BYTES} bytes`, { detail: 'too_many_targets' });
}

function readFileText(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code === 'ELOOP' ? 'is a symlink' : 'cannot be read';
    throw new MasterRunnerError('invalid_input', `the targets file ${path} ${why}`, { detail: 'invalid_rollout_option' });
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new MasterRunnerError('invalid_input', `the targets file ${path} is not a regular file`, { detail: 'invalid_rollout_option' });
    if (stat.size > MAX_TARGETS_BYTES) tooLarge(`the targets file ${path}`);
    const buffer = Buffer.alloc(stat.size + 1);
    let length = 0;
    for (let n = -1; n !== 0 && length < buffer.length; length += n) n = readSync(fd, buffer, length, buffer.length - length, null);
    if (length > MAX_TARGETS_BYTES) tooLarge(`the targets file ${path}`);
    return buffer.subarray(0, length).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

async function readStdinText(stdin: AsyncIterable<Buffer | string>): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    size += buffer.length;
    if (size > MAX_TARGETS_BYTES) tooLarge('standard input');
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The targets named by `--targets <file|->`. */
export async function readTargets(source: string, stdin: AsyncIterable<Buffer | string> = process.stdin): Promise<string[]> {
  if (source === '-') return parseTargets(await readStdinText(stdin), 'standard input');
  return parseTargets(readFileText(source), `the targets file ${source}`);
}
