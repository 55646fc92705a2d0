import { isRecordId } from '@oduflow/master-runner';

/*
 * A page cursor is opaque to callers: the base64url of the last request id
 * of the page (keyset pagination by request id, the store's list order). It
 * carries no filter, so a cursor used with other filters just starts after
 * that id.
 */

export function encodeCursor(lastRequestId: string): string {
  return Buffer.from(lastRequestId, 'utf8').toString('base64url');
}

/** The request id a cursor stands for, or undefined when it is not one of ours. */
export function decodeCursor(cursor: string): string | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  return isRecordId(id) && encodeCursor(id) === cursor ? id : undefined;
}
