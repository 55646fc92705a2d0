import { isBlocking, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { MasterRunnerError } from '../errors.js';
import { decodeRecord, encodeRecord } from '../record-codec.js';

/*
 * A record as a row: the record itself as jsonb (validated with the
 * protocol's RequestRecordSchema on the way in and on the way out, through
 * the same codec as the file store) and the columns the constraints and
 * indexes work on, all derived from it. A row whose record does not
 * validate, or whose columns disagree with its record, is store_corrupt for
 * that record: never skipped.
 */

export const RECORD_COLUMNS = 'request_id, minion_id, jid, state, blocking, record';

export interface RecordRow {
  readonly request_id: string;
  readonly minion_id: string;
  readonly jid: string;
  readonly state: string;
  readonly blocking: boolean;
  readonly record: unknown;
}

/** Values for (request_id, minion_id, jid, state, blocking, record::jsonb), in that order. */
export function rowValues(record: RequestRecord): readonly unknown[] {
  if (record.protocol !== 1) {
    throw new MasterRunnerError('internal', 'the PostgreSQL store holds protocol 1 records only', { requestId: record.request_id });
  }
  const stored = encodeRecord(record); // throws when the record would not read back
  return [record.request_id, record.minion_id, record.jid, record.state, isBlocking(record), JSON.stringify(stored)];
}

function corrupt(requestId: string, what: string): MasterRunnerError {
  return new MasterRunnerError('store_corrupt', `stored record ${requestId} ${what}`, { requestId });
}

function decodeStored(row: RecordRow): RequestRecord {
  try {
    return decodeRecord(row.record, row.request_id);
  } catch (error) {
    // The codec's message names the record; the error names it too, for callers that match on it.
    if (MasterRunnerError.isInstance(error) && error.code === 'store_corrupt') {
      throw new MasterRunnerError('store_corrupt', error.message, { requestId: row.request_id });
    }
    throw error;
  }
}

export function decodeRow(row: RecordRow): ProtocolRequestRecord {
  const record = decodeStored(row);
  if (record.protocol !== 1) throw corrupt(row.request_id, 'is not a protocol 1 record');
  if (record.minion_id !== row.minion_id || record.jid !== row.jid || record.state !== row.state || isBlocking(record) !== row.blocking) {
    throw corrupt(row.request_id, 'does not match the columns it is indexed by');
  }
  return record;
}
