/*
 * @oduflow/master-runner/internal: what oduflow's own tests, benches, apps
 * and conformance suites need but an application must not call. No
 * compatibility promise: these change with the implementation.
 *
 *   crash seams      the boundaries a crash test kills a process at (MasterDeps.crashAt
 *                    and the file store's crashAt take them; the defaults never fire)
 *   publishPrepared  publishes a prepared record without the capability check dispatch runs first
 *   record codec     the stored form of a record, and the legacy field it reads
 *   record files     the file names of the file store
 */
export { CRASH_POINTS, STORE_CRASH_POINTS, noCrash, type CrashPoint, type StoreCrashPoint } from './crash-points.js';
export { publishPrepared } from './publish.js';
export { LEGACY_RECONCILIATION_KEY, decodeRecord, encodeRecord } from './record-codec.js';
export { recordFileName, recordIdFromFileName } from './record-id.js';
