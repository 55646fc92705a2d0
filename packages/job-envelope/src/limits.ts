/** Version of the on-disk checkpoint and report formats; part of the resume fingerprint. */
export const JOB_SCHEMA_VERSION = 1 as const;

/** At most this many stages per job: every stage has one ledger file, and a resume copies the ledger once. */
export const MAX_STAGES = 10_000;

/** Canonical UTF-8 size limit of one stage's saved state (a batch of a few thousand targets with their request ids). */
export const MAX_STAGE_STATE_BYTES = 1024 * 1024;

/** Canonical UTF-8 size limit of a spec's inputs (hashed, never stored): a target list of ~100 000 minion ids. */
export const MAX_INPUT_BYTES = 8 * 1024 * 1024;

/** Longest workspace identity (hashed, never stored). */
export const MAX_WORKSPACE_IDENTITY_LENGTH = 4096;

/** Summary bounds: distinct count keys and per-item rows. */
export const MAX_SUMMARY_COUNTS = 64;
export const MAX_SUMMARY_ITEMS = 100_000;

/**
 * A job type names a lock file (`locks/<job_type>.lock`), so it is one plain
 * lowercase file-name component.
 */
export const JOB_TYPE_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;

/** Stage ids appear in ledgers and reports: short identifiers, never free text. */
export const STAGE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** A failure code a stage may declare and report (`ctx.fail`), and a summary count key or item state. */
export const CODE_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;

/** A summary item id, e.g. a minion id: an identifier without spaces or path separators. */
export const ITEM_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;
