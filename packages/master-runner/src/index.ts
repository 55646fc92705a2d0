// The public API of @oduflow/master-runner, one named export at a time.
// Crash seams, publishPrepared and the record codec are in ./internal.
export {
  MASTER_RUNNER_DETAILS,
  MASTER_RUNNER_ERROR_CODES,
  MasterRunnerError,
  isMasterRunnerErrorCode,
  type MasterRunnerErrorCode,
  type MasterRunnerErrorDetail,
  type MasterRunnerErrorOptions,
} from './errors.js';
export type {
  AdmissionKey,
  ClaimKeyOptions,
  ClaimOutboxOptions,
  CreateOptions,
  CreateOutcome,
  KeyClaim,
  ListPage,
  OutboxEntry,
  RecordFilter,
  RecordStore,
  ScanOptions,
  TargetUnit,
  UpdateOutcome,
} from './record-store.js';
export { isRecordId } from './record-id.js';
export { DEFAULT_FILE_STORE_ROOT, createFileRecordStore, type FileRecordStoreOptions } from './file-record-store.js';
export { migrateFileRecordStore, type MigrateFileStoreOptions, type MigrateFileStoreReport } from './migrate-store.js';
export { FILE_STORE_FORMAT_VERSION } from './store-format.js';
export type {
  CallOptions,
  CallOutcome,
  EventStreamEnd,
  FleetAnswer,
  FleetCallOutcome,
  FleetTarget,
  FollowEventsOptions,
  PublishOutcome,
  SaltCall,
  SaltClient,
  SaltEventSource,
  SaltFailureReason,
  SaltFleetClient,
} from './salt-client.js';
export { createSaltApiClient, type SaltApiClient, type SaltApiClientOptions } from './salt-api-client.js';
export { readPrivateFile, readPrivatePasswordFile } from './credentials.js';
export { jidForInstant, nextJid } from './jid.js';
export { REDACTED_PATHS, createMasterLogger, silentLogger, type Logger, type LoggerOptions } from './logger.js';
export { DEFAULT_CALL_TIMEOUT_MS, resolveDeps, type MasterDeps, type ResolvedDeps } from './deps.js';
export { capabilityCheckOf, checkCapability, readCapabilityAnswer, type CapabilityCheck, type CapabilityReading } from './capability.js';
export { validateDispatchInput, type DispatchInput, type ValidDispatch } from './dispatch-input.js';
export { dispatch, type DispatchOptions, type DispatchResult } from './dispatch.js';
export {
  admissionKey,
  admit,
  type AdmissionContent,
  type AdmissionResult,
  type AdmissionScope,
  type AdmitOptions,
} from './admission.js';
export {
  relayOnce,
  startOutboxRelay,
  type OutboxRelay,
  type RelayMetrics,
  type RelayOptions,
  type RelayResult,
  type RelaySkip,
} from './outbox-relay.js';
export type { PublishResult, PublishResultKind } from './publish.js';
export { publishPending, type PendingResult, type PendingSkip, type PublishPendingOptions } from './publish-pending.js';
export {
  DEFAULT_POLL_CONCURRENCY,
  poll,
  pollAll,
  statusEvent,
  sweep,
  type PollOutcome,
  type PollResult,
  type SweepOptions,
  type SweepSummary,
} from './poll.js';
export type { BackoffOptions } from './poll-schedule.js';
export { startPoller, type Poller, type PollerMetrics, type PollerOptions } from './poller.js';
export {
  recordEvent,
  startEventRecorder,
  type EventRecorder,
  type EventRecorderMetrics,
  type EventRecorderOptions,
  type IgnoredEvent,
} from './event-recorder.js';
export { reconcile, type ReconcileInput } from './reconcile.js';
export { preflight, type PreflightReport } from './preflight.js';
export {
  FLEET_GLOB,
  FLEET_STATUSES,
  verifyFleet,
  type FleetResult,
  type FleetRow,
  type FleetStatus,
  type VerifyFleetDeps,
  type VerifyFleetOptions,
} from './verify-fleet.js';
export {
  DEFAULT_BATCH_SIZE,
  DEFAULT_MAX_UNRESOLVED,
  MAX_BATCH_SIZE,
  MAX_ROLLOUT_TARGETS,
  ROLLOUT_JOB_TYPE,
  ROLLOUT_SPEC_VERSION,
  parseRolloutSpec,
  rolloutJobSpec,
  stageIdOf,
  type RolloutInput,
  type RolloutSpec,
} from './rollout/spec.js';
export { rolloutRequestId } from './rollout/request-id.js';
export { BUDGET_OUTCOMES, PENDING, ROLLOUT_OUTCOMES, type RolloutOutcome, type TargetOutcome, type TargetRow } from './rollout/outcomes.js';
export { ROLLOUT_FAILURE_CODES, type RolloutFailureCode } from './rollout/batch-stage.js';
export { ROLLOUT_COUNT_KEYS, RolloutReportSchema, type RolloutCountKey, type RolloutReport, type RolloutReportStage } from './rollout/report.js';
export {
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_ROLLOUT_CONCURRENCY,
  DEFAULT_STAGE_TIMEOUT_MS,
  MAX_ROLLOUT_CONCURRENCY,
  runRollout,
  startRollout,
  type RolloutHandle,
  type RolloutOptions,
  type RolloutProgress,
} from './rollout/start-rollout.js';
export { listRollouts, readRollout, type RolloutListing } from './rollout/read-rollout.js';
