import { ReceiptStoreError } from './errors.js';

/** Prefix of the temporary files of atomic writes; names starting with it are reserved. */
export const TEMP_PREFIX = '.tmp-';

/** Longest single name Linux accepts (NAME_MAX), in UTF-8 bytes. */
const NAME_MAX = 255;

/**
 * A name must be exactly one directory entry: the kernel would follow '/',
 * '.' and '..' out of the pinned directory.
 */
export function checkName(name: unknown): asserts name is string {
  if (typeof name !== 'string') throw new ReceiptStoreError('invalid_name', 'a name must be a string');
  if (name === '' || name === '.' || name === '..') {
    throw new ReceiptStoreError('invalid_name', `"${name}" is not a usable entry name`);
  }
  if (name.includes('/') || name.includes('\0')) {
    throw new ReceiptStoreError('invalid_name', 'a name must be a single path component without "/" or NUL');
  }
  if (name.startsWith(TEMP_PREFIX)) {
    throw new ReceiptStoreError('invalid_name', `names starting with "${TEMP_PREFIX}" are reserved for temporary files`);
  }
  if (Buffer.byteLength(name, 'utf8') > NAME_MAX) {
    throw new ReceiptStoreError('invalid_name', `a name may be at most ${NAME_MAX} bytes long`);
  }
}

/** Splits an absolute path into checked components ('/' gives []). Empty components ('//') are ignored. */
export function splitAbsolutePath(absPath: unknown): string[] {
  if (typeof absPath !== 'string' || !absPath.startsWith('/')) {
    throw new ReceiptStoreError('invalid_name', 'the store directory must be given as an absolute path');
  }
  if (absPath.includes('\0')) throw new ReceiptStoreError('invalid_name', 'a path must not contain NUL');
  const components = absPath.split('/').filter((component) => component !== '');
  for (const component of components) {
    if (component === '.' || component === '..') {
      throw new ReceiptStoreError('invalid_name', `the path ${absPath} must not contain "." or ".." components`);
    }
    if (Buffer.byteLength(component, 'utf8') > NAME_MAX) {
      throw new ReceiptStoreError('invalid_name', `a component of ${absPath} is longer than ${NAME_MAX} bytes`);
    }
  }
  return components;
}
