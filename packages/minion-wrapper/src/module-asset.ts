import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { isSemver } from '@oduflow/protocol';
import { MinionWrapperError } from './errors.js';
import { MODULE_FILE_NAME } from './paths.js';

const PACKAGE_NAME = '@oduflow/minion-wrapper';

let root: string | undefined;

/**
 * Absolute path of the installed `@oduflow/minion-wrapper` package (the
 * Python module ships beside dist/ under `salt/`). Node's resolver finds it
 * through the package's own `./package.json` export, from the ESM build, the
 * CJS build (tsup's shim gives it import.meta.url) or the sources alike;
 * looked up on first use, so importing the package reads nothing.
 */
export function packageRoot(): string {
  if (root === undefined) {
    try {
      root = dirname(createRequire(import.meta.url).resolve(`${PACKAGE_NAME}/package.json`));
    } catch (error) {
      throw new MinionWrapperError('module_asset_unreadable', `cannot locate the ${PACKAGE_NAME} package root`, { cause: error });
    }
  }
  return root;
}

/** The Salt file tree shipped in this package (`_modules/`, `client_receipts/`). */
export function saltTreeDir(): string {
  return join(packageRoot(), 'salt');
}

/** Absolute path of the reviewed `oduflow_job.py` execution module. */
export function modulePath(): string {
  return join(saltTreeDir(), '_modules', MODULE_FILE_NAME);
}

/** Absolute path of the `client_receipts` state template (`@ODUFLOW_MODULE_SHA256@` placeholder). */
export function clientReceiptsSlsPath(): string {
  return join(saltTreeDir(), 'client_receipts', 'init.sls');
}

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
  return readAsset(modulePath(), 'oduflow_job module shipped with @oduflow/minion-wrapper');
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
