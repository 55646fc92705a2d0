/*
 * The PostgreSQL schema, as versioned migrations in code. Everything lives
 * in the schema `oduflow`, so the store can share a database with other
 * applications and a database that is ours is recognisable. A migration is
 * applied once, in its own transaction, under an advisory lock (migrate.ts);
 * it is never edited after release: a change is a new migration.
 *
 * The constraints do the enforcing, so no bug in a caller (or a second
 * master that skipped a lock) can break an invariant:
 *   - jids: every JID ever reserved, never deleted (the primary key is the
 *     check-and-take); requests.jid references it and is unique as well;
 *   - requests_one_blocking_per_target: a partial unique index, at most one
 *     blocking record per target; `blocking` is written by the store from the
 *     protocol's isBlocking (the state list has one owner, the protocol) and
 *     checked again on every read;
 *   - requests_record_matches: the indexed columns are the record's own;
 *   - idempotency_keys: one row per scoped key hash; a claim has a lease, a
 *     bound key its binding time, never both;
 *   - outbox: at most one entry per request, and only for a stored request;
 *   - request_history (version 2): a request's history entries, only for a
 *     stored request, numbered per request; written by the same transaction
 *     as the record change they describe, and pruned there to the protocol's
 *     cap (history.ts). A request stored before version 2 has no rows until
 *     its next change: its history was not kept.
 * Identifiers sort byte-wise (COLLATE "C"), as the file store's names do, so
 * list() and keyset pages have the same order in every database locale.
 */

export const SCHEMA = 'oduflow';

/** The schema version this release reads and writes. */
export const POSTGRES_SCHEMA_VERSION = 2;

export interface Migration {
  readonly version: number;
  readonly description: string;
  readonly sql: string;
}

/** Run in every migration transaction, after the advisory lock: makes the bookkeeping exist. */
export const BOOTSTRAP_SQL = `
CREATE SCHEMA IF NOT EXISTS ${SCHEMA};
CREATE TABLE IF NOT EXISTS ${SCHEMA}.schema_migrations (
  version integer PRIMARY KEY CHECK (version > 0),
  description text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
);
`;

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'requests, jids, targets, idempotency keys, outbox',
    sql: `
CREATE TABLE ${SCHEMA}.targets (
  minion_id text COLLATE "C" PRIMARY KEY,
  first_seen_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ${SCHEMA}.jids (
  jid text COLLATE "C" PRIMARY KEY,
  request_id text COLLATE "C" NOT NULL,
  reserved_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ${SCHEMA}.requests (
  request_id text COLLATE "C" PRIMARY KEY,
  minion_id text COLLATE "C" NOT NULL REFERENCES ${SCHEMA}.targets (minion_id),
  jid text COLLATE "C" NOT NULL UNIQUE REFERENCES ${SCHEMA}.jids (jid),
  state text COLLATE "C" NOT NULL,
  blocking boolean NOT NULL,
  record jsonb NOT NULL,
  written_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT requests_record_matches CHECK (
    jsonb_typeof(record) = 'object'
    AND record ->> 'request_id' = request_id
    AND record ->> 'minion_id' = minion_id
    AND record ->> 'jid' = jid
    AND record ->> 'state' = state
  )
);
CREATE UNIQUE INDEX requests_one_blocking_per_target ON ${SCHEMA}.requests (minion_id) WHERE blocking;
-- The unresolved records in request-id order: keyset pages of the poller's walk read only them.
CREATE INDEX requests_unresolved ON ${SCHEMA}.requests (request_id) WHERE blocking;
CREATE INDEX requests_by_target ON ${SCHEMA}.requests (minion_id, request_id);
CREATE INDEX requests_by_state ON ${SCHEMA}.requests (state, request_id);

CREATE TABLE ${SCHEMA}.idempotency_keys (
  key_hash text COLLATE "C" PRIMARY KEY,
  fingerprint text COLLATE "C" NOT NULL,
  request_id text COLLATE "C" NOT NULL,
  tenant text NOT NULL,
  actor text NOT NULL,
  state text COLLATE "C" NOT NULL CHECK (state IN ('claimed', 'bound')),
  lease_until timestamptz,
  bound_at timestamptz,
  CONSTRAINT idempotency_keys_state_fields CHECK (
    (state = 'claimed' AND lease_until IS NOT NULL AND bound_at IS NULL)
    OR (state = 'bound' AND bound_at IS NOT NULL AND lease_until IS NULL)
  )
);
CREATE INDEX idempotency_keys_bound ON ${SCHEMA}.idempotency_keys (bound_at) WHERE state = 'bound';
CREATE INDEX idempotency_keys_lapsing ON ${SCHEMA}.idempotency_keys (lease_until) WHERE state = 'claimed';

CREATE TABLE ${SCHEMA}.outbox (
  request_id text COLLATE "C" PRIMARY KEY REFERENCES ${SCHEMA}.requests (request_id),
  state_data_json text NOT NULL,
  enqueued_at timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  due_at timestamptz NOT NULL,
  claimed_until timestamptz
);
CREATE INDEX outbox_by_age ON ${SCHEMA}.outbox (enqueued_at, request_id);
`,
  },
  {
    version: 2,
    description: 'request history',
    sql: `
CREATE TABLE ${SCHEMA}.request_history (
  request_id text COLLATE "C" NOT NULL REFERENCES ${SCHEMA}.requests (request_id),
  seq integer NOT NULL CHECK (seq > 0),
  at text COLLATE "C" NOT NULL,
  from_state text COLLATE "C",
  to_state text COLLATE "C" NOT NULL,
  event text COLLATE "C" NOT NULL,
  source text COLLATE "C" NOT NULL,
  observed text COLLATE "C",
  reason_code text COLLATE "C",
  PRIMARY KEY (request_id, seq)
);
`,
  },
];

/** Names of our constraints that callers turn into outcomes. */
export const ONE_BLOCKING_PER_TARGET = 'requests_one_blocking_per_target';
