import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isSemver } from '@oduflow/protocol';
import { MinionWrapperError } from './errors.js';
import { MODULE_FILE_NAME } from './paths.js';

const PACKAGE_NAME = '@oduflow/minion-wrapper';

/**
 * Walks up from this file (src/ when run from source, dist/ when built, in
 * either the ESM or the CJS build) to the directory whose package.json names
 * this package. The Python module ships beside it under `salt/`.
 */
function findPackageRoot(start: string): string {
  let dir = start;
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        const parsed = JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown };
        if (parsed.name === PACKAGE_NAME) return dir;
      } catch {
        // not our manifest: keep walking
      }
    }
    const parent = dirname(dir);
    if (parent === dir) {
      throw new MinionWrapperError('module_asset_unreadable', `cannot locate the ${PACKAGE_NAME} package root`);
    }
    dir = parent;
  }
}

/** Absolute path of the installed `@oduflow/minion-wrapper` package. */
export const PACKAGE_ROOT: string = findPackageRoot(dirname(fileURLToPath(import.meta.url)));
/** The Salt file tree shipped in this package (`_modules/`, `client_receipts/`). */
export const SALT_TREE_DIR: string = join(PACKAGE_ROOT, 'salt');
/** Absolute path of the reviewed `oduflow_job.py` execution module. */
export const MODULE_PATH: string = join(SALT_TREE_DIR, '_modules', MODULE_FILE_NAME);
/** Absolute path of the `client_receipts` state template (`@ODUFLOW_MODULE_SHA256@` placeholder). */
export const CLIENT_RECEIPTS_SLS_PATH: string = join(SALT_TREE_DIR, 'client_receipts', 'init.sls');

export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export function readAsset(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new MinionWrapperError('module_asset_unreadable', `cannot read the ${what}`, { cause: error });
  }
}

/** The exact bytes of the reviewed module (read on each call; the file is the source of truth). */
export function moduleBytes(): Buffer {
  return readAsset(MODULE_PATH, 'oduflow_job module shipped with @oduflow/minion-wrapper');
}

/** Lowercase hex SHA-256 of {@link moduleBytes}. */
export function moduleSha256(): string {
  return sha256Hex(moduleBytes());
}

const VERSION_LINE = /^__version__ = "([^"\n]+)"$/gm;

/** Parses the single `__version__ = "x.y.z"` line of a module source. */
export function parseModuleVersion(source: Uint8Array | string): string {
  const text = typeof source === 'string' ? source : Buffer.from(source).toString('utf8');
  const matches = [...text.matchAll(VERSION_LINE)];
  const version = matches.length === 1 ? matches[0]?.[1] : undefined;
  if (!isSemver(version)) {
    throw new MinionWrapperError(
      'module_version_missing',
      'the module must contain exactly one line __version__ = "<semver>"',
    );
  }
  return version;
}

/** The module's `__version__` (what `oduflow_job.capabilities` reports as `module_version`). */
export function moduleVersion(): string {
  return parseModuleVersion(moduleBytes());
}
