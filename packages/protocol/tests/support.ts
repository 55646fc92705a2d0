import { ProtocolError } from '../src/errors.js';
import { createRequestRecord } from '../src/request-record.js';

/** Three instants a second apart, for records and events in tests. */
export const T0 = '2026-11-29T10:00:00.000Z';
export const T1 = '2026-11-29T10:00:01.000Z';
export const T2 = '2026-11-29T10:00:02.000Z';

/** A fresh `configure` request, prepared at T0: the record most tests start from. */
export const BASE_RECORD = createRequestRecord({
  request_id: '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f',
  minion_id: 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b',
  profile: 'configure',
  state_digest: '',
  jid: '20261129100000000000',
  at: T0,
});

/** The ProtocolError code `fn` throws, or undefined if it returns; any other error propagates. */
export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    if (ProtocolError.isInstance(error)) return error.code;
    throw error;
  }
  return undefined;
}
