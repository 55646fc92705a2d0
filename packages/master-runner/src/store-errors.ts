import { ReceiptStoreError } from '@oduflow/receipt-store';
import { MasterRunnerError } from './errors.js';

/** Maps a receipt-store failure onto this package's codes, keeping the finer code as `detail`. */
function fromStoreError(error: unknown, what: string): unknown {
  if (!ReceiptStoreError.isInstance(error)) return error;
  const options = { cause: error, detail: error.code };
  switch (error.code) {
    case 'unsafe_path':
      return new MasterRunnerError('store_unsafe', `${what}: the store holds an unsafe path (${error.message})`, options);
    case 'malformed_json':
      return new MasterRunnerError('store_corrupt', `${what}: a stored file is not valid JSON`, options);
    case 'lock_busy':
    case 'lock_timeout':
      return new MasterRunnerError('store_busy', `${what}: another worker holds the lock`, options);
    case 'not_found':
      return new MasterRunnerError('not_found', `${what}: not found`, options);
    case 'invalid_name':
      return new MasterRunnerError('invalid_input', `${what}: not a usable name`, options);
    case 'already_exists':
    case 'io_error':
      return new MasterRunnerError('store_io', `${what}: ${error.message}`, options);
  }
}

/** Runs `fn`, rethrowing receipt-store failures as MasterRunnerError. */
export async function storeCall<T>(what: string, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw fromStoreError(error, what);
  }
}
