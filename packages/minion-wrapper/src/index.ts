export { MINION_WRAPPER_ERROR_CODES, MinionWrapperError, type MinionWrapperErrorCode } from './errors.js';
export { assertCanonicalMinionId } from './minion-id.js';
export {
  DEFAULT_EXTMODS_DIR,
  DEFAULT_MINION_CACHE_DIR,
  DEFAULT_MINION_CONFIG_PATH,
  MODULE_FILE_NAME,
  installedModulePath,
} from './paths.js';
export {
  clientReceiptsSlsPath,
  moduleBytes,
  moduleSha256,
  modulePath,
  moduleVersion,
  packageRoot,
  parseModuleVersion,
  readAsset,
  saltTreeDir,
  sha256Hex,
} from './module-asset.js';
export { MODULE_SHA256_PLACEHOLDER, assertSha256Hex, renderClientReceiptsSls } from './client-receipts.js';
export { MAX_CLIENT_RECEIPTS_INTERVAL_SECONDS, MIN_CLIENT_RECEIPTS_INTERVAL_SECONDS } from './cloud-init-inputs.js';
export {
  CLIENT_RECEIPTS_SCHEDULE_NAME,
  DEFAULT_CLIENT_RECEIPTS_INTERVAL_SECONDS,
  DEFAULT_CLIENT_RECEIPTS_SPLAY_SECONDS,
  READINESS_MINION_OPTIONS,
  UNSET_MINION_OPTIONS,
  clientReceiptsScheduleEntry,
} from './minion-config.js';
export {
  HOLD_SALT_MINION_SEMAPHORE,
  MINION_CONFIG_FILE_MODE,
  MODULE_FILE_MODE,
  planCloudInit,
  renderCloudInit,
  type CloudInitFile,
  type CloudInitOptions,
  type CloudInitPlan,
} from './cloud-init.js';
export {
  FILE_TREE_MODULE_PATH,
  FILE_TREE_SLS_PATH,
  FILE_TREE_SUMS_PATH,
  writeSaltFileTree,
  type SaltFileTree,
  type SaltFileTreeEntry,
  type SaltFileTreeOptions,
} from './file-tree.js';
export {
  VERIFY_STATUSES,
  formatMode,
  verifyInstalledModule,
  type VerifyOptions,
  type VerifyResult,
  type VerifyStatus,
} from './verify.js';
