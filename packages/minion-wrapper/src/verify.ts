import { constants, lstatSync, openSync, readFileSync, closeSync, fstatSync } from 'node:fs';
import { join } from 'node:path';
import { assertSha256Hex } from './client-receipts.js';
import { MODULE_FILE_NAME, moduleSha256, sha256Hex } from './module-asset.js';

export const VERIFY_STATUSES = ['ok', 'missing', 'not_a_regular_file', 'unsafe_permissions', 'digest_mismatch'] as const;
export type VerifyStatus = (typeof VERIFY_STATUSES)[number];

export interface VerifyResult {
  ok: boolean;
  status: VerifyStatus;
  /** `<extmods>/modules/oduflow_job.py` */
  path: string;
  expectedSha256: string;
  /** null when the file could not be read as a regular file. */
  actualSha256: string | null;
  /** Octal permission bits (`"0644"`), null when missing. */
  mode: string | null;
}

export interface VerifyOptions {
  /** The digest to require; defaults to the reviewed module's SHA-256. */
  expectedSha256?: string;
}

/**
 * Checks the module installed in a minion's extension-module directory
 * against the reviewed digest. The file must be a regular file (a symlink is
 * refused, never followed), writable by nobody but its owner, and byte-equal
 * to the reviewed module. I/O errors other than "missing" throw.
 */
export function verifyInstalledModule(extmodsDir: string, options: VerifyOptions = {}): VerifyResult {
  const expectedSha256 = assertSha256Hex(options.expectedSha256 ?? moduleSha256());
  const path = join(extmodsDir, 'modules', MODULE_FILE_NAME);
  const result = (status: VerifyStatus, actualSha256: string | null, mode: number | null): VerifyResult => ({
    ok: status === 'ok',
    status,
    path,
    expectedSha256,
    actualSha256,
    mode: mode === null ? null : `0${(mode & 0o777).toString(8).padStart(3, '0')}`,
  });

  let stat;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return result('missing', null, null);
    throw error;
  }
  if (!stat.isFile()) return result('not_a_regular_file', null, stat.mode);

  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  let bytes: Buffer;
  let mode: number;
  try {
    const opened = fstatSync(fd);
    if (!opened.isFile() || opened.ino !== stat.ino || opened.dev !== stat.dev) {
      return result('not_a_regular_file', null, opened.mode);
    }
    mode = opened.mode;
    bytes = readFileSync(fd);
  } finally {
    closeSync(fd);
  }
  const actual = sha256Hex(bytes);
  if ((mode & 0o022) !== 0) return result('unsafe_permissions', actual, mode);
  return result(actual === expectedSha256 ? 'ok' : 'digest_mismatch', actual, mode);
}
