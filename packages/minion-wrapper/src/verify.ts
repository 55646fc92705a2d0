import { constants, lstatSync, openSync, readFileSync, closeSync, fstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { assertSha256Hex } from './client-receipts.js';
import { moduleSha256, sha256Hex } from './module-asset.js';
import { installedModulePath } from './paths.js';

export const VERIFY_STATUSES = [
  'ok',
  'missing',
  'not_a_regular_file',
  'unsafe_directory',
  'unsafe_owner',
  'multiply_linked',
  'unsafe_permissions',
  'digest_mismatch',
] as const;
export type VerifyStatus = (typeof VERIFY_STATUSES)[number];

export interface VerifyResult {
  ok: boolean;
  status: VerifyStatus;
  /** `<extmods>/modules/oduflow_job.py` */
  path: string;
  expectedSha256: string;
  /** null when the file could not be read as a regular file. */
  actualSha256: string | null;
  /** All 12 permission bits in octal (`"0644"`, `"4755"`), null when missing. */
  mode: string | null;
  /** Owner uid of the file, null when missing. */
  uid: number | null;
  /** For `unsafe_directory`: the directory that failed (`<extmods>` or `<extmods>/modules`). */
  unsafePath?: string;
}

export interface VerifyOptions {
  /** The digest to require; defaults to the reviewed module's SHA-256. */
  expectedSha256?: string;
}

/** All 12 mode bits: `0644` stays `0644`, `04755` shows as `4755`. */
export const formatMode = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, '0');

const euid = (): number => (typeof process.geteuid === 'function' ? process.geteuid() : 0);
const trustedOwner = (uid: number): boolean => uid === 0 || uid === euid();

/**
 * Checks the module installed in a minion's extension-module directory
 * against the reviewed digest:
 *
 * - `<extmods>` and `<extmods>/modules` must be real directories (lstat: a
 *   symlink is refused), owned by root or the effective uid, and not
 *   group/other-writable (`unsafe_directory`);
 * - the module must be a regular file (a symlink is refused, never followed),
 *   owned by root or the effective uid (`unsafe_owner`), with exactly one
 *   link (`multiply_linked`), writable by nobody but its owner
 *   (`unsafe_permissions`), and byte-equal to the reviewed module.
 *
 * I/O errors other than "missing" throw.
 */
export function verifyInstalledModule(extmodsDir: string, options: VerifyOptions = {}): VerifyResult {
  const expectedSha256 = assertSha256Hex(options.expectedSha256 ?? moduleSha256());
  const path = installedModulePath(extmodsDir);
  const modulesDir = dirname(path);
  const result = (
    status: VerifyStatus,
    actualSha256: string | null,
    stat: { mode: number; uid: number } | null,
    unsafePath?: string,
  ): VerifyResult => ({
    ok: status === 'ok',
    status,
    path,
    expectedSha256,
    actualSha256,
    mode: stat === null ? null : formatMode(stat.mode),
    uid: stat === null ? null : stat.uid,
    ...(unsafePath === undefined ? {} : { unsafePath }),
  });

  for (const dir of [extmodsDir, modulesDir]) {
    let dirStat;
    try {
      dirStat = lstatSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return result('missing', null, null);
      throw error;
    }
    if (!dirStat.isDirectory()) {
      // a symlink or something else where a directory belongs; a regular file is an I/O-level surprise
      if (dirStat.isSymbolicLink()) return result('unsafe_directory', null, null, dir);
      const error = new Error(`not a directory: ${dir}`) as NodeJS.ErrnoException;
      error.code = 'ENOTDIR';
      throw error;
    }
    if (!trustedOwner(dirStat.uid) || (dirStat.mode & 0o022) !== 0) {
      return result('unsafe_directory', null, null, dir);
    }
  }

  let stat;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return result('missing', null, null);
    throw error;
  }
  if (!stat.isFile()) return result('not_a_regular_file', null, stat);

  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  let bytes: Buffer;
  let opened;
  try {
    opened = fstatSync(fd);
    if (!opened.isFile() || opened.ino !== stat.ino || opened.dev !== stat.dev) {
      return result('not_a_regular_file', null, opened);
    }
    bytes = readFileSync(fd);
  } finally {
    closeSync(fd);
  }
  const actual = sha256Hex(bytes);
  if (!trustedOwner(opened.uid)) return result('unsafe_owner', actual, opened);
  if (opened.nlink !== 1) return result('multiply_linked', actual, opened);
  if ((opened.mode & 0o022) !== 0) return result('unsafe_permissions', actual, opened);
  return result(actual === expectedSha256 ? 'ok' : 'digest_mismatch', actual, opened);
}
