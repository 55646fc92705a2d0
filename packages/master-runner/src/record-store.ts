import type { HistorySource, ProtocolRequestRecord, RecordChange, RequestHistory, RequestRecord, RequestState } from '@oduflow/protocol';

/*
 * The store is shaped around short atomic units of work, not around files:
 * "under this target's lock, see what blocks it and maybe create a record" and
 * "under this request's lock, read the record, decide the next one, write it".
 * The file store implements a unit with flock + atomic renames; a PostgreSQL
 * store implements the same unit as one transaction holding a row lock. No
 * unit ever waits on the network: callers do Salt I/O between units.
 *
 * Every committed change of a record (its creation included) adds one entry
 * to the request's history (@oduflow/protocol request-history.ts) in the
 * same durable step as the record: never one without the other. The file
 * store keeps the history in the record's own file (no extra write or
 * fsync), PostgreSQL in request_history rows of the same transaction.
 */

export interface RecordFilter {
  /** Only records for this target. */
  readonly minionId?: string;
  /** Only records for one of these targets (a tenant's). */
  readonly minionIds?: readonly string[];
  /** Only records that block their target (see isBlocking). */
  readonly unresolved?: boolean;
  /** Only records in one of these states. */
  readonly states?: readonly RequestState[];
}

export type CreateOutcome =
  | { readonly created: true; readonly record: ProtocolRequestRecord }
  /** `options.key` was given and its claim no longer belongs to this record's request id (it lapsed and was taken): nothing was stored. */
  | { readonly created: false; readonly reason: 'claim_lost' }
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
  /**
   * Reserves the record's JID and stores the record, both or (observably)
   * neither. With `options` (an HTTP admission), in the same unit: binds the
   * claimed Idempotency-Key to the record and enqueues it in the outbox.
   * Callers check blockers() first, under the same lock; a store may also
   * refuse a blocking record for a target that already has one by throwing
   * `target_blocked` with nothing stored (PostgreSQL does, by constraint).
   */
  create(record: ProtocolRequestRecord, options?: CreateOptions): Promise<CreateOutcome>;
}

/*
 * Admission (DESIGN §7, seed 003 "Consistency boundaries"): an
 * Idempotency-Key is first *claimed* (a lease, so a concurrent admission of
 * the same key sees it in flight), then *bound* to the record by the same
 * create unit that stores the record and its outbox entry. A claim whose
 * admitter died lapses after its lease; a key bound to a record replays that
 * record until it expires (kept at least 24 h; expireKeys forgets older ones,
 * never their requests).
 */

/** An Idempotency-Key as a store keeps it: hashed, scoped, bound to what it asked. The raw key is never stored. */
export interface AdmissionKey {
  /** Lowercase hex SHA-256 of the canonical JSON {action, actor, key, tenant}: the scoped key's identity (a store may name files or rows by it; anything else is invalid_input). */
  readonly keyHash: string;
  /** Lowercase hex SHA-256 of the canonical JSON of the content asked for (minion id, profile, state digest). */
  readonly fingerprint: string;
  /** Who admitted it (kept with the key, for operators). */
  readonly tenant: string;
  readonly actor: string;
}

export interface ClaimKeyOptions {
  /** The request id the key is bound to if it is free. */
  readonly requestId: string;
  readonly now: Date;
  /** How long the claim lives without being bound (an admitter that died frees the key after this). */
  readonly leaseMs: number;
}

export type KeyClaim =
  /** The key was free (or its last claim lapsed with nothing stored): admit under this request id. */
  | { readonly kind: 'claimed'; readonly requestId: string }
  /** The key is bound to a stored request with the same fingerprint: answer with that request. */
  | { readonly kind: 'admitted'; readonly requestId: string }
  /** The key is claimed or bound with another fingerprint (HTTP 422). */
  | { readonly kind: 'mismatch' }
  /** Another admission holds a live claim on the key with the same fingerprint (HTTP 409). */
  | { readonly kind: 'in_flight' };

export interface CreateOptions {
  /** Who creates the record, for its history's first entry (default `dispatch`, the CLI's). */
  readonly source?: HistorySource;
  /** Bind this claimed key (claimed under the record's request id) to the record. */
  readonly key?: AdmissionKey;
  /** Enqueue the record for the outbox relay; `stateDataJson` is the custom high data ('' for fixed profiles). */
  readonly outbox?: { readonly stateDataJson: string };
}

/** A request admitted and not yet handed to Salt. The only place state data is ever stored, and only until publication. */
export interface OutboxEntry {
  readonly requestId: string;
  readonly stateDataJson: string;
  /** ISO instant the entry was enqueued: its record's `created_at` (the caller's clock, like every instant the store is given). */
  readonly enqueuedAt: string;
  /** How many times a relay claimed it. */
  readonly attempts: number;
}

export interface ClaimOutboxOptions {
  readonly limit: number;
  readonly now: Date;
  /** Other relays skip a claimed entry until this long after `now`. */
  readonly leaseMs: number;
}

export interface ListPage {
  /** Only records whose request id sorts after this one (keyset pagination). */
  readonly after?: string;
  /** At most this many records. */
  readonly limit?: number;
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
  /** Records in request-id order (stable across stores), optionally one page of them. */
  list(filter?: RecordFilter, page?: ListPage): Promise<RequestRecord[]>;
  /** How many records block their target, by state. */
  countUnresolved(): Promise<Partial<Record<RequestState, number>>>;
  /**
   * The records matching `filter`, a page at a time, never all in memory at
   * once (the poller's walk over a fleet's backlog). A record that matches
   * for the whole walk is yielded exactly once; one created, changed or
   * settled meanwhile may or may not be. No order is promised. No lock is
   * held while the caller works on a page.
   */
  scan(filter?: RecordFilter, options?: ScanOptions): AsyncIterable<readonly RequestRecord[]>;
  /**
   * The records that block this target (as TargetUnit.blockers), read
   * without the target's lock: it never waits for a unit that holds it and
   * writes nothing. A look only (refuseIfTargetBlocked, before a network
   * call): a create under way may or may not be seen, so a decision to create
   * is taken again under the lock (reserve). Throws invalid_input for a
   * string that is not a minion id, as withTarget does.
   */
  blockersOf(minionId: string): Promise<RequestRecord[]>;
  /** Runs `work` under the target's exclusive lock. */
  withTarget<T>(minionId: string, work: (unit: TargetUnit) => Promise<T>): Promise<T>;
  /**
   * Under the request's exclusive lock: reads the record, calls `decide`
   * (pure, synchronous: no I/O inside a unit) and writes its result when it is
   * a different object. A store may get the same effect optimistically: write
   * only if the record is still the one decided on, else call `decide` again
   * on the newer record (PostgreSQL does, at most once more, then locks). Throws `not_found` when there is no such record; an
   * error thrown by `decide` aborts the unit with nothing written. A store may
   * refuse a write that would leave two blocking records on one target
   * (`target_blocked`, nothing written); no protocol-1 transition does that.
   * `change` says which event and which part of the master made the change:
   * it becomes the history entry written with the record.
   */
  updateRequest(requestId: string, decide: (current: RequestRecord) => RequestRecord, change: RecordChange): Promise<UpdateOutcome>;
  /**
   * The request's history, oldest entry first (capped: see HISTORY_HEAD and
   * HISTORY_TAIL), or undefined when there is no such record. A record that
   * predates histories has no entries.
   */
  history(requestId: string): Promise<RequestHistory | undefined>;
  /** Claims an Idempotency-Key for an admission (see KeyClaim). */
  claimKey(key: AdmissionKey, options: ClaimKeyOptions): Promise<KeyClaim>;
  /** Drops `requestId`'s live claim on the key (its admission stored nothing); a bound key is kept. */
  releaseKey(key: AdmissionKey, requestId: string): Promise<void>;
  /**
   * Forgets keys bound before `before` (a key is bound at its record's
   * `created_at`: the admission's instant on the caller's clock) and claims
   * whose lease ended before it; their requests stay. Returns how many.
   */
  expireKeys(before: Date): Promise<number>;
  /**
   * Outbox entries due at `now` (new ones are due at once; a deferred one at
   * its `at`) and not claimed by another relay, oldest `enqueuedAt` first
   * (then request id), at most `limit`, each claimed for `leaseMs` against
   * other relays and its `attempts` counted. An entry is handed out only once
   * its record is stored (the create unit holds both or neither).
   */
  claimOutbox(options: ClaimOutboxOptions): Promise<OutboxEntry[]>;
  /** Removes the entry (its request was handed to Salt or needs no publication any more); absent is fine. */
  removeOutbox(requestId: string): Promise<void>;
  /** Makes the entry due again at `at` (a publication that provably sent nothing). */
  deferOutbox(requestId: string, at: Date): Promise<void>;
  close(): Promise<void>;
}
