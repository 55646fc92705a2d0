import { isRequestId } from '@oduflow/protocol';

/*
 * Protocol-1 records are named by their canonical request UUID. Records that
 * predate protocol 1 keep whatever name they were stored under, within a
 * conservative character set, so an operator can still show and reconcile them.
 */
const LEGACY_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const RECORD_SUFFIX = '.json';

/** A name under which a record may be looked up: a canonical request id, or a legacy record's name. */
export function isRecordId(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const legacyName = LEGACY_NAME.test(value) && !value.endsWith(RECORD_SUFFIX);
  return legacyName || isRequestId(value);
}

export function recordFileName(requestId: string): string {
  return `${requestId}${RECORD_SUFFIX}`;
}

/** The record id stored in `fileName`, or undefined for anything that is not a record file. */
export function recordIdFromFileName(fileName: string): string | undefined {
  if (!fileName.endsWith(RECORD_SUFFIX)) return undefined;
  const id = fileName.slice(0, -RECORD_SUFFIX.length);
  return isRecordId(id) ? id : undefined;
}
