export {
  RECEIPT_STORE_ERROR_CODES,
  ReceiptStoreError,
  isReceiptStoreErrorCode,
  type ReceiptStoreErrorCode,
} from './errors.js';
export { writeFileAtomic, type WriteFileAtomicOptions } from './atomic-file.js';
export type { FileLock, LockOptions } from './lock.js';
export { openPrivateDir, type PrivateDir, type PrivateDirOptions, type WriteJsonOptions } from './private-dir.js';
