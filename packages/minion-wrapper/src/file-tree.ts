import { join, resolve } from 'node:path';
import { writeFileAtomic } from '@oduflow/receipt-store';
import { renderClientReceiptsSls } from './client-receipts.js';
import { modulePath, parseModuleVersion, readAsset, sha256Hex } from './module-asset.js';
import { MODULE_FILE_NAME } from './paths.js';

/**
 * Paths inside the Salt file tree a master serves, relative to its
 * file_roots entry. The module is served outside `_modules/`: Salt's saltutil.sync_* (which every highstate
 * runs while autoload_dynamic_modules is True) copies `_modules/` into the
 * minion's extmods with no digest check. Only client_receipts installs the
 * module, after checking the reviewed SHA-256.
 */
export const FILE_TREE_MODULE_PATH = `oduflow/${MODULE_FILE_NAME}`;
export const FILE_TREE_SLS_PATH = 'client_receipts/init.sls';
export const FILE_TREE_SUMS_PATH = 'SHA256SUMS';

export interface SaltFileTreeOptions {
  /** Module file to serve; defaults to the reviewed {@link modulePath}. For tests only. */
  moduleSource?: string;
}

export interface SaltFileTreeEntry {
  /** Path relative to the tree root. */
  path: string;
  sha256: string;
  bytes: number;
}

export interface SaltFileTree {
  dir: string;
  moduleSha256: string;
  moduleVersion: string;
  /** The module and the state, in SHA256SUMS order; SHA256SUMS itself last. */
  files: SaltFileTreeEntry[];
}

/**
 * Served files are public, reviewed assets the salt-master (often another
 * user than the writer) must read: 0644 files in 0755 directories.
 */
const SERVED_FILE_MODE = 0o644;
const SERVED_DIR_MODE = 0o755;

/**
 * Writes (or refreshes) the oduflow part of a master's Salt file tree under
 * `outDir`: `oduflow/oduflow_job.py`, `client_receipts/init.sls` rendered
 * with the module's SHA-256, and `SHA256SUMS` (sha256sum format, paths
 * relative to `outDir`). Other files in `outDir` are left alone.
 */
export function writeSaltFileTree(outDir: string, options: SaltFileTreeOptions = {}): SaltFileTree {
  const dir = resolve(outDir);
  const module = readAsset(options.moduleSource ?? modulePath(), 'oduflow_job module');
  const moduleSha256 = sha256Hex(module);
  const moduleVersion = parseModuleVersion(module);
  const sls = Buffer.from(renderClientReceiptsSls(moduleSha256), 'utf8');
  const entries: Array<[string, Buffer]> = [
    [FILE_TREE_MODULE_PATH, module],
    [FILE_TREE_SLS_PATH, sls],
  ];
  const sums = Buffer.from(entries.map(([path, bytes]) => `${sha256Hex(bytes)}  ${path}\n`).join(''), 'utf8');
  entries.push([FILE_TREE_SUMS_PATH, sums]);
  // One durable write sequence for the whole repository (receipt-store):
  // temp, fsync, rename, fsync(dir); new directories are synced into their
  // parents. SHA256SUMS is written last, so it never lists a file that is not
  // in place yet.
  for (const [path, bytes] of entries) {
    writeFileAtomic(join(dir, path), bytes, { mode: SERVED_FILE_MODE, dirMode: SERVED_DIR_MODE });
  }
  return {
    dir,
    moduleSha256,
    moduleVersion,
    files: entries.map(([path, bytes]) => ({ path, sha256: sha256Hex(bytes), bytes: bytes.length })),
  };
}
