import { type JsonValue, canonicalJson, isRequestId, isSha256Hex } from '@oduflow/protocol';
import { z } from 'zod';
import { JobEnvelopeError } from './errors.js';
import { resumeFingerprint } from './fingerprint.js';
import { CODE_PATTERN, JOB_SCHEMA_VERSION, JOB_TYPE_PATTERN, MAX_STAGES, MAX_STAGE_STATE_BYTES, STAGE_ID_PATTERN } from './limits.js';
import { schemaFailure } from './schema-failure.js';
import { allDistinct } from './spec.js';
import { UtcTimestampSchema, notAfter } from './time.js';

/*
 * The stage ledger: what a run header (`job.json`) and its stage records
 * (`stage-NNNNN.json`) may say, and the rules that make them one consistent
 * history. Pure: the workspace module reads the files, this one judges them.
 */

/** A run id (and a job id, the id of a job's first run) is a canonical RFC 9562 UUID, the protocol's one pattern. */
export const RunIdSchema = z.string().refine(isRequestId);

const Sha256Schema = z.string().refine(isSha256Hex);
const NullableTimestamp = UtcTimestampSchema.nullable();
const Attempts = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const STAGE_STATUSES = ['pending', 'running', 'succeeded', 'failed'] as const;
export type StageStatus = (typeof STAGE_STATUSES)[number];

/** What a run header may record; `interrupted` is never stored (readJob derives it from the run lock). */
export const RUN_STATUSES = ['running', 'succeeded', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** The message of every stage exception, whatever it threw: nothing of the exception is ever looked at. */
export const INTERNAL_STAGE_ERROR = Object.freeze({
  category: 'internal',
  code: 'stage_exception',
  message: 'stage execution failed',
} as const);

/** The fixed message of a failure a stage reported itself with one of its declared codes (`ctx.fail`). */
export const DECLARED_FAILURE_MESSAGE = 'stage reported failure' as const;

/**
 * A stage failure, sanitized: either the fixed internal tuple, or a code the
 * stage declared with the fixed message. No exception name, message or stack.
 */
export const StageErrorSchema = z.union([
  z.strictObject({
    category: z.literal(INTERNAL_STAGE_ERROR.category),
    code: z.literal(INTERNAL_STAGE_ERROR.code),
    message: z.literal(INTERNAL_STAGE_ERROR.message),
  }),
  z.strictObject({
    category: z.literal('stage'),
    code: z.string().regex(CODE_PATTERN),
    message: z.literal(DECLARED_FAILURE_MESSAGE),
  }),
]);
export type StageError = z.infer<typeof StageErrorSchema>;

interface StageFacts {
  status: StageStatus;
  started_at: string | null;
  finished_at: string | null;
  attempts: number;
  error: StageError | null;
}

/** The per-status shape of a stage: which timestamps, how many attempts, and an error exactly when failed. */
function checkStageFacts(stage: StageFacts, ctx: z.RefinementCtx): void {
  const issue = (path: string, message: string): void => ctx.addIssue({ code: 'custom', path: [path], message });
  const started = stage.status !== 'pending';
  const finished = stage.status === 'succeeded' || stage.status === 'failed';
  if ((stage.started_at !== null) !== started) issue('started_at', 'started_at does not fit the status');
  if ((stage.finished_at !== null) !== finished) issue('finished_at', 'finished_at does not fit the status');
  if (started !== stage.attempts > 0) issue('attempts', 'attempts does not fit the status');
  if ((stage.error !== null) !== (stage.status === 'failed')) issue('error', 'an error is recorded exactly for a failed stage');
  if (stage.started_at !== null && stage.finished_at !== null && !notAfter(stage.started_at, stage.finished_at)) {
    issue('finished_at', 'the stage finished before it started');
  }
}

const stageFields = {
  stage_id: z.string().regex(STAGE_ID_PATTERN),
  started_at: NullableTimestamp,
  finished_at: NullableTimestamp,
  attempts: Attempts,
  error: StageErrorSchema.nullable(),
};

/** One stage as the ledger and the report see it: status, UTC timestamps, attempts, sanitized error. */
export const StageStateSchema = z.strictObject({ ...stageFields, status: z.enum(STAGE_STATUSES) }).superRefine(checkStageFacts);
export type StageState = z.infer<typeof StageStateSchema>;

/*
 * The canonical text of each state value the envelope made itself: the
 * ledger's value of a saved state (stateOfText), and a
 * state read back and proved (validateStageRecord). These objects are never
 * handed to a stage or mutated (a stage gets a copy, detachedState), so the
 * text stays theirs; a record write then splices it in instead of
 * serializing the state again, and a copy is one JSON.parse.
 */
const stateTexts = new WeakMap<object, string>();

function rememberText(state: JsonValue, text: string): void {
  if (typeof state === 'object' && state !== null) stateTexts.set(state, text);
}

function knownText(state: JsonValue): string | undefined {
  return typeof state === 'object' && state !== null ? stateTexts.get(state) : undefined;
}

/**
 * The canonical text of a stage's own saved state: canonical JSON, at most
 * MAX_STAGE_STATE_BYTES; null when it saved none. The text is the runner's
 * copy of the state, which the stage can no longer change.
 */
export function canonicalStateText(value: unknown): string | null {
  if (value === null) return null;
  let text: string;
  try {
    text = canonicalJson(value);
  } catch (error) {
    throw new JobEnvelopeError('invalid_stage_state', 'a stage state must be canonical JSON (objects, arrays, strings, booleans, null, safe integers)', { cause: error });
  }
  if (Buffer.byteLength(text, 'utf8') > MAX_STAGE_STATE_BYTES) {
    throw new JobEnvelopeError('invalid_stage_state', `a stage state may be at most ${MAX_STAGE_STATE_BYTES} canonical bytes`);
  }
  return text;
}

/** The ledger's value of a state text from canonicalStateText (its text remembered); `handedOut`: a copy for a stage, not remembered. */
export function stateOfText(text: string | null, handedOut = false): JsonValue | null {
  if (text === null) return null;
  const value = JSON.parse(text) as JsonValue;
  if (!handedOut) rememberText(value, text);
  return value;
}

/** A copy of a ledger state for a stage or a hook, which may do what it likes with it. */
export function detachedState(state: JsonValue | null): JsonValue | null {
  if (state === null) return null;
  const text = knownText(state);
  return text === undefined ? structuredClone(state) : (JSON.parse(text) as JsonValue);
}

/**
 * The text of a stage file: what JSON.stringify(record) writes (the state is
 * the record's last key), with the state's canonical text spliced in when the
 * envelope already made it; `stateText`, when given, is the state instead of
 * `record.state`.
 */
export function stageRecordText(record: StageRecord, stateText?: string | null): string {
  const { state, ...head } = record;
  const stateJson = stateText !== undefined ? (stateText ?? 'null') : state === null ? 'null' : (knownText(state) ?? JSON.stringify(state));
  return `${JSON.stringify(head).slice(0, -1)},"state":${stateJson}}`;
}

/** `stage-NNNNN.json`: one file per reached stage, holding its ledger entry and its saved state together. */
const StageRecordSchema = z
  .strictObject({
    schema_version: z.literal(JOB_SCHEMA_VERSION),
    run_id: RunIdSchema,
    index: z.number().int().min(0).max(MAX_STAGES - 1),
    ...stageFields,
    status: z.enum(['running', 'succeeded', 'failed']),
    state: z.unknown(),
  })
  .superRefine(checkStageFacts)
  .superRefine((record, ctx) => {
    if (record.state === null) return;
    // One walk: canonicalJson throws exactly for a value outside the domain, and its text gives the size.
    let text: string;
    try {
      text = canonicalJson(record.state);
    } catch {
      ctx.addIssue({ code: 'custom', path: ['state'], message: 'state is outside canonical JSON' });
      return;
    }
    if (Buffer.byteLength(text, 'utf8') > MAX_STAGE_STATE_BYTES) {
      ctx.addIssue({ code: 'custom', path: ['state'], message: 'state is over the size limit' });
    } else {
      // The parsed state is the value the ledger keeps (z.unknown passes it through): a resume's copy of it is not serialized again.
      rememberText(record.state as JsonValue, text);
    }
  });
export type StageRecord = Omit<z.infer<typeof StageRecordSchema>, 'state'> & { state: JsonValue | null };

/** The run header `job.json`: identity, lineage, compatibility fields, fingerprint, status, times. */
export const JobRunSchema = z
  .strictObject({
    schema_version: z.literal(JOB_SCHEMA_VERSION),
    run_id: RunIdSchema,
    /** The first run's id, the same in every run that resumes it: a stable key for what the job derives (e.g. request ids). */
    job_id: RunIdSchema,
    /** The run this one resumed; null for a job's first run. */
    resumed_from: RunIdSchema.nullable(),
    job_type: z.string().regex(JOB_TYPE_PATTERN),
    spec_version: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
    dry_run: z.boolean(),
    input_sha256: Sha256Schema,
    workspace_identity_sha256: Sha256Schema,
    stage_ids: z.array(z.string().regex(STAGE_ID_PATTERN)).min(1).max(MAX_STAGES),
    fingerprint: Sha256Schema,
    status: z.enum(RUN_STATUSES),
    /** When the job's first run started. */
    job_started_at: UtcTimestampSchema,
    /** When this run started. */
    created_at: UtcTimestampSchema,
    finished_at: NullableTimestamp,
  })
  .superRefine((run, ctx) => {
    const issue = (path: string, message: string): void => ctx.addIssue({ code: 'custom', path: [path], message });
    if ((run.finished_at === null) !== (run.status === 'running')) issue('finished_at', 'finished_at does not fit the status');
    if (!notAfter(run.job_started_at, run.created_at)) issue('created_at', 'the run started before its job');
    if (run.finished_at !== null && !notAfter(run.created_at, run.finished_at)) issue('finished_at', 'the run finished before it started');
    if (run.resumed_from === null ? run.job_id !== run.run_id : run.job_id === run.run_id || run.resumed_from === run.run_id) {
      issue('job_id', 'the lineage ids do not fit together');
    }
  });
export type JobRun = z.infer<typeof JobRunSchema>;

/** `superseded.json` in a source run: written once, when a resume takes the run over. */
export const SupersededSchema = z
  .strictObject({ schema_version: z.literal(JOB_SCHEMA_VERSION), run_id: RunIdSchema, successor: RunIdSchema })
  .refine((marker) => marker.successor !== marker.run_id, { path: ['successor'] });
export type Superseded = z.infer<typeof SupersededSchema>;

/** One stage of a validated ledger: its entry plus its saved state. */
export type LedgerStage = StageState & { readonly state: JsonValue | null };

/** A run proven consistent: its header and every stage, pending ones included, in order. */
export interface Ledger {
  readonly run: JobRun;
  readonly stages: readonly LedgerStage[];
}

const STAGE_FILE = /^stage-([0-9]{5})\.json$/;

export function stageFileName(index: number): string {
  return `stage-${String(index).padStart(5, '0')}.json`;
}

/** The index of a stage file name, or undefined for any other name. */
export function stageFileIndex(name: string): number | undefined {
  const match = STAGE_FILE.exec(name);
  return match === null ? undefined : Number(match[1]);
}

function corrupt(message: string): JobEnvelopeError {
  return new JobEnvelopeError('corrupt_checkpoint', message);
}

/** Validates `job.json` on its own: schema, its binding to the run's directory name, unique stages, and its own fingerprint. */
function validateRunHeader(value: unknown, runId: string): JobRun {
  const parsed = JobRunSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('corrupt_checkpoint', `the header of run ${runId}`, parsed.error);
  const run = parsed.data;
  if (run.run_id !== runId) throw corrupt(`the header of run ${runId} names another run`);
  if (!allDistinct(run.stage_ids)) throw corrupt(`the header of run ${runId} lists a stage id twice`);
  // Trust nothing stored about compatibility until it hashes to the stored fingerprint.
  if (resumeFingerprint(run) !== run.fingerprint) {
    throw corrupt(`the stored fingerprint of run ${runId} does not match its own compatibility fields`);
  }
  return run;
}

function validateStageRecord(value: unknown, run: JobRun, index: number): StageRecord {
  const parsed = StageRecordSchema.safeParse(value);
  if (!parsed.success) throw schemaFailure('corrupt_checkpoint', `stage ${index} of run ${run.run_id}`, parsed.error);
  const record = parsed.data;
  if (record.run_id !== run.run_id || record.index !== index) {
    throw corrupt(`stage file ${index} of run ${run.run_id} is bound to another run or position`);
  }
  if (record.stage_id !== run.stage_ids[index]) {
    throw corrupt(`stage file ${index} of run ${run.run_id} names a stage the header does not have at that position`);
  }
  return record as StageRecord;
}

const PENDING = { status: 'pending', started_at: null, finished_at: null, attempts: 0, error: null, state: null } as const;

/**
 * Checks the order of the whole ledger: stages are reached in order (only a
 * prefix has records, all succeeded but possibly the last), each starts no
 * earlier than the job and than its predecessor finished, and the header's
 * status agrees with its stages.
 */
function checkLedgerOrder(run: JobRun, records: readonly StageRecord[]): void {
  const id = run.run_id;
  records.forEach((record, index) => {
    const last = index === records.length - 1;
    if (!last && record.status !== 'succeeded') throw corrupt(`stage ${index} of run ${id} did not succeed, yet a later stage was reached`);
    if (!notAfter(run.job_started_at, record.started_at as string)) throw corrupt(`stage ${index} of run ${id} started before its job`);
    const previous = records[index - 1];
    if (previous !== undefined && !notAfter(previous.finished_at as string, record.started_at as string)) {
      throw corrupt(`stage ${index} of run ${id} started before the stage before it finished`);
    }
  });
  const frontier = records.at(-1);
  if (run.status === 'succeeded' && (records.length !== run.stage_ids.length || frontier?.status !== 'succeeded')) {
    throw corrupt(`run ${id} is recorded as succeeded, but not every stage succeeded`);
  }
  if (run.status === 'failed' && frontier?.status !== 'failed') throw corrupt(`run ${id} is recorded as failed without a failed stage`);
  if (run.finished_at !== null && frontier?.finished_at != null && !notAfter(frontier.finished_at, run.finished_at)) {
    throw corrupt(`run ${id} finished before its last stage did`);
  }
}

/**
 * Proves a run's checkpoint consistent, or throws `corrupt_checkpoint`:
 * the header (schema, binding, unique stage ids, stored fingerprint equal to
 * the recomputation from its persisted fields), then every stage record
 * (schema, binding to run, position and stage id, per-status timestamps and
 * error tuple, state), then their order. `stageFiles` maps each
 * `stage-NNNNN.json` found to its parsed content.
 */
export function validateLedger(header: unknown, runId: string, stageFiles: ReadonlyMap<number, unknown>): Ledger {
  const run = validateRunHeader(header, runId);
  const indices = [...stageFiles.keys()].sort((a, b) => a - b);
  indices.forEach((index, position) => {
    if (index !== position) throw corrupt(`run ${runId} has a stage file out of sequence (position ${index})`);
  });
  if (indices.length > run.stage_ids.length) throw corrupt(`run ${runId} has more stage files than stages`);
  const records = indices.map((index) => validateStageRecord(stageFiles.get(index), run, index));
  checkLedgerOrder(run, records);
  const stages = run.stage_ids.map((stage_id, index): LedgerStage => {
    const record = records[index];
    if (record === undefined) return { stage_id, ...PENDING };
    const { stage_id: _id, schema_version: _v, run_id: _r, index: _i, ...entry } = record;
    return { stage_id, ...entry };
  });
  return { run, stages };
}
