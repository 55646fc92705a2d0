import type { ProtocolRequestRecord, RequestRecord, RequestState } from '@oduflow/protocol';

/*
 * The store is shaped around short atomic units of work, not around files:
 * "under this target's lock, see what blocks it and maybe create a record" and
 * "under this request's lock, read the record, decide the next one, write it".
 * The file store implements a unit with flock + atomic renames; a PostgreSQL
 * store implements the same unit as one transaction holding a row lock. No
 * unit ever waits on the network: callers do Salt I/O between units.
 */

export interface RecordFilter {
  /** Only records for this target. */
  readonly minionId?: string;
  /** Only records that block their target (see isBlocking). */
  readonly unresolved?: boolean;
  /** Only records in one of these states. */
  readonly states?: readonly RequestState[];
}

export type CreateOutcome =
  | { readonly created: true; readonly record: ProtocolRequestRecord }
  /** Another request holds this JID (or held it once): choose the next one. */
  | { readonly created: false; readonly reason: 'jid_taken' }
  /** A record with this request id exists already (returned as stored). */
  | { readonly created: false; readonly reason: 'request_exists'; readonly existing: RequestRecord };

/** What a unit may do while it holds a target's lock. */
export interface TargetUnit {
  readonly minionId: string;
  /**
   * The records that refuse another managed dispatch to this target. A legacy
   * record whose target cannot be read blocks every target (fail closed).
   */
  blockers(): Promise<RequestRecord[]>;
  /** Reserves the record's JID and stores the record, both or (observably) neither. */
  create(record: ProtocolRequestRecord): Promise<CreateOutcome>;
}

export interface UpdateOutcome {
  readonly before: RequestRecord;
  readonly after: RequestRecord;
  /** False when `decide` returned the record it was given: nothing was written. */
  readonly changed: boolean;
}

export interface ScanOptions {
  /** Records per page (default 256). */
  readonly pageSize?: number;
}

export interface RecordStore {
  /** Where the records live, for operators (a directory, later a redacted URL). */
  readonly location: string;
  get(requestId: string): Promise<RequestRecord | undefined>;
  /**
   * The record that holds this JID (the one it was reserved for), or
   * undefined: no such JID, a JID burned by a create that lost, or not a JID.
   * Cheap (the event recorder looks up every return it sees).
   */
  getByJid(jid: string): Promise<RequestRecord | undefined>;
  /** Records in request-id order (stable across stores). */
  list(filter?: RecordFilter): Promise<RequestRecord[]>;
  /**
   * The records matching `filter`, a page at a time, never all in memory at
   * once (the poller's walk over a fleet's backlog). A record that matches
   * for the whole walk is yielded exactly once; one created, changed or
   * settled meanwhile may or may not be. No order is promised. No lock is
   * held while the caller works on a page.
   */
  scan(filter?: RecordFilter, options?: ScanOptions): AsyncIterable<readonly RequestRecord[]>;
  /** Runs `work` under the target's exclusive lock. */
  withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T>;
  /**
   * Under the request's exclusive lock: reads the record, calls `decide`
   * (pure, synchronous: no I/O inside a unit) and writes its result when it is
   * a different object. Throws `not_found` when there is no such record; an
   * error thrown by `decide` aborts the unit with nothing written.
   */
  updateRequest(requestId: string, decide: (current: RequestRecord) => RequestRecord): Promise<UpdateOutcome>;
  close(): Promise<void>;
}
