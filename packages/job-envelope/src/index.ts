export {
  JOB_ENVELOPE_ERROR_CODES,
  JobEnvelopeError,
  isJobEnvelopeErrorCode,
  type JobEnvelopeErrorCode,
} from './errors.js';
export {
  CODE_PATTERN,
  ITEM_ID_PATTERN,
  JOB_SCHEMA_VERSION,
  JOB_TYPE_PATTERN,
  MAX_INPUT_BYTES,
  MAX_STAGES,
  MAX_STAGE_STATE_BYTES,
  MAX_SUMMARY_COUNTS,
  MAX_SUMMARY_ITEMS,
  STAGE_ID_PATTERN,
} from './limits.js';
export { JobSpecSchema, parseJobSpec, type JobSpec, type JobSpecInput } from './spec.js';
export { compatibilityOf, resumeFingerprint, type CompatibilityFields } from './fingerprint.js';
export {
  INTERNAL_STAGE_ERROR,
  JobRunSchema,
  RUN_STATUSES,
  STAGE_STATUSES,
  StageErrorSchema,
  StageStateSchema,
  type JobRun,
  type LedgerStage,
  type RunStatus,
  type StageError,
  type StageState,
  type StageStatus,
} from './ledger.js';
export { JobReportSchema, JobSummarySchema, ReportStageSchema, type JobReport, type JobSummary, type ReportStage } from './report.js';
export type { JobStage, StageContext, StageEntry } from './stage.js';
export {
  CHECKPOINT_KINDS,
  runJob,
  type CheckpointEvent,
  type CheckpointKind,
  type RunJobOptions,
  type SummaryInput,
} from './run-job.js';
export { JOB_RUN_STATUSES, listJobs, readJob, type JobListing, type JobRunStatus, type JobRunView } from './read-job.js';
