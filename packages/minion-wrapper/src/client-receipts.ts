import { isSha256Hex } from '@oduflow/protocol';
import { clientReceiptsSlsPath, moduleSha256, readAsset } from './module-asset.js';
import { MinionWrapperError } from './errors.js';

/** The token in `salt/client_receipts/init.sls` that the reviewed digest replaces. */
export const MODULE_SHA256_PLACEHOLDER = '@ODUFLOW_MODULE_SHA256@';

export function assertSha256Hex(value: string): string {
  if (!isSha256Hex(value)) {
    throw new MinionWrapperError('invalid_sha256', 'a SHA-256 digest must be 64 lowercase hex characters');
  }
  return value;
}

/**
 * The `client_receipts` state as a master serves it: the template with the
 * module's SHA-256 (default: the reviewed module in this package) in place of
 * the placeholder. The template must hold the placeholder exactly once.
 */
export function renderClientReceiptsSls(sha256: string = moduleSha256()): string {
  assertSha256Hex(sha256);
  const template = readAsset(clientReceiptsSlsPath(), 'client_receipts state template').toString('utf8');
  const parts = template.split(MODULE_SHA256_PLACEHOLDER);
  if (parts.length !== 2) {
    throw new MinionWrapperError(
      'sls_template_invalid',
      'the client_receipts template must contain the digest placeholder exactly once',
    );
  }
  return parts.join(sha256);
}
