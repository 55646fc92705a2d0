import { posix } from 'node:path';

/*
 * Where things live on a Linux minion, defined once: the cloud-init
 * fragment, the file tree, the installed-module check, the oduflow-minion CLI
 * and the local test topology all import these.
 */

/** Salt's default minion cachedir (`cachedir`). */
export const DEFAULT_MINION_CACHE_DIR = '/var/cache/salt/minion';
/** Salt's default extension-module directory (`extension_modules`), inside the cachedir. */
export const DEFAULT_EXTMODS_DIR = `${DEFAULT_MINION_CACHE_DIR}/extmods`;
/** Where the fragment writes the minion's oduflow configuration (a `minion.d` include). */
export const DEFAULT_MINION_CONFIG_PATH = '/etc/salt/minion.d/oduflow.conf';
/** The execution module's file name, in the package, in the served tree and on the minion. */
export const MODULE_FILE_NAME = 'oduflow_job.py';

/** `<extmodsDir>/modules/oduflow_job.py`: where Salt loads the execution module from. */
export function installedModulePath(extmodsDir: string): string {
  return posix.join(extmodsDir, 'modules', MODULE_FILE_NAME);
}
