export {
  RECEIPT_STORE_ERROR_CODES,
  ReceiptStoreError,
  isReceiptStoreErrorCode,
  type ReceiptStoreErrorCode,
} from './errors.js';
export type { FileLock, LockOptions } from './lock.js';
export { openPrivateDir, type PrivateDir, type PrivateDirOptions, type WriteJsonOptions } from './private-dir.js';
