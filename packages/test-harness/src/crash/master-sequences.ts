import { applyEvent, createRequestRecord, isBlocking, isProtocolRecord, type ProtocolRequestRecord, type RequestHistory, type RequestRecord, type StatusAnswer } from '@oduflow/protocol';
import { mkdirSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
// The sources, not the built package: the code under test is the one vitest (and Stryker) loaded.
import { createFileRecordStore, migrateFileRecordStore, MasterRunnerError, poll, publishPending, type RecordStore } from '../../../master-runner/src/index.js';
import type { CallOutcome, PublishOutcome, SaltClient } from '../../../master-runner/src/salt-client.js';
import type { Position, Recorded, Sequence } from './enumerate.js';
import { FsImage } from './fs-image.js';
import { MILESTONE_DIR, toOperations } from './operations.js';
import { traceSelf } from './strace.js';
import { currentUmask } from './umask.js';

/*
 * The master file store's writes (master-runner's file-record-store.ts and
 * migrate-store.ts), traced in this process. Recovery is what a restarted
 * master does: open the store (migrate-store first when it says so), read
 * the record (get, getByJid, list, the unresolved index, the target's
 * blockers), publish-pending against a stand-in salt-api that counts
 * publications, and a poll whose status answer comes from the minion's
 * state in the scenario. The store's own crash seams (S1–S6) are the
 * milestones.
 */

const MINION_A = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const MINION_B = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';
const EARLIER = '1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5';
const SETTLED = '2e3f4051-6b7c-4d8e-9fa0-b1c2d3e4f5a6';
const JID = '20261129100000000001';
const AT = '2026-11-29T10:00:00.000Z';

const binding = (r: ProtocolRequestRecord) => ({ protocol: 1 as const, minion_id: r.minion_id, request_id: r.request_id, jid: r.jid, profile: r.profile, state_digest: r.state_digest });
function answer(r: ProtocolRequestRecord, status: 'running' | 'succeeded' | 'not_started', passed = 0, total = 0): StatusAnswer {
  return { ...binding(r), status, passed, total };
}

function prepared(requestId = REQUEST, minionId = MINION_A, jid = JID): ProtocolRequestRecord {
  return createRequestRecord({ request_id: requestId, minion_id: minionId, profile: 'configure', state_digest: '', jid, at: AT });
}
const publishing = (r: RequestRecord): RequestRecord => applyEvent(r, { type: 'intent_recorded', at: AT });
const published = (r: RequestRecord): RequestRecord => applyEvent(publishing(r), { type: 'publish_acked', at: AT });
const running = (r: ProtocolRequestRecord): RequestRecord => applyEvent(published(r), { type: 'observed', at: AT, answer: answer(r, 'running') });
const succeeded = (r: ProtocolRequestRecord): RequestRecord => applyEvent(running(r), { type: 'observed', at: AT, answer: answer(r, 'succeeded', 2, 2) });

/** The minion, as the stand-in answers for it: capabilities ready, status from the scenario. */
class StandInSalt implements SaltClient {
  publications = 0;
  constructor(private readonly status: (args: readonly string[]) => StatusAnswer) {}
  publish(): Promise<PublishOutcome> {
    this.publications += 1;
    return Promise.resolve({ kind: 'acked' });
  }
  call(_minionId: string, fun: string, args: readonly string[]): Promise<CallOutcome> {
    return Promise.resolve(this.answer(fun, args));
  }
  private answer(fun: string, args: readonly string[]): CallOutcome {
    if (fun === 'oduflow_job.capabilities') {
      const ret = { protocol: 1, module_version: '1.1.0', salt_version: '3006.27', module_sha256: 'a'.repeat(64), ready: true, reasons: [] };
      return { kind: 'returned', retcode: 0, ret };
    }
    if (fun === 'oduflow_job.status') return { kind: 'returned', retcode: 0, ret: this.status(args) };
    return { kind: 'failed', reason: 'http_error', sent: true };
  }
}

export interface MasterOutcome {
  readonly open: string;
  /** migrate-store was run because open said so. */
  readonly migrated?: boolean;
  readonly record?: RequestRecord;
  /** The request's history as the store reads it after the crash (undefined: no record). */
  readonly history?: RequestHistory;
  readonly byJid?: RequestRecord;
  readonly all: readonly string[];
  readonly unresolved: readonly string[];
  readonly blockers: readonly string[];
  /** Another request created with the same JID on another target. */
  readonly sameJid?: string;
  readonly publications: number;
  readonly polled?: RequestRecord;
  readonly blockersAfter: readonly string[];
  readonly error?: string;
}

interface MasterContext {
  readonly spec: MasterSequenceSpec;
}

export interface MasterSequenceSpec {
  readonly name: string;
  /** The records already in the store before the workload (none: a new store). */
  readonly setup: (root: string) => Promise<void>;
  /** The traced workload; `mark` makes a milestone visible to the trace. */
  readonly work: (root: string, mark: (name: string) => void) => Promise<void>;
  /** The request the workload acts on (undefined: none, e.g. opening a new store). */
  readonly request?: string;
  /** The versions the record may be in at each milestone ('absent' for none). */
  readonly table: Readonly<Record<string, readonly string[]>>;
  /** Named versions of the record. */
  readonly versions: Readonly<Record<string, RequestRecord>>;
  /** What the minion answers to status (the scenario's minion state). */
  readonly minion?: StatusAnswer;
  /** After the poll, the record must be in this state with these counts. */
  readonly afterPoll?: { readonly state: string; readonly passed: number; readonly total: number };
  /** Records that exist before the workload and must never be lost: whether each blocks, and its target. */
  readonly others: Readonly<Record<string, { readonly blocks: boolean; readonly minionId: string }>>;
  /** A migration: opening before it finished may say needs_migration; recovery runs migrate-store. */
  readonly migration?: boolean;
}

async function withStore<T>(root: string, work: (store: RecordStore) => Promise<T>): Promise<T> {
  const store = await createFileRecordStore({ root, lockWaitMs: 5_000 });
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

function codeOf(error: unknown): string {
  if (MasterRunnerError.isInstance(error)) return `error:${error.code}${error.detail === undefined ? '' : `/${error.detail}`}`;
  return `exception:${error instanceof Error ? error.message : String(error)}`;
}

async function recoverOne(root: string, spec: MasterSequenceSpec): Promise<MasterOutcome> {
  let open = 'ok';
  let migrated = false;
  try {
    await withStore(root, () => Promise.resolve());
  } catch (error) {
    open = codeOf(error);
    if (spec.migration !== true || open !== 'error:store_format/needs_migration') return { open, all: [], unresolved: [], blockers: [], publications: 0, blockersAfter: [] };
    await migrateFileRecordStore({ root, lockWaitMs: 5_000 });
    migrated = true;
  }
  const salt = new StandInSalt(() => spec.minion ?? ({} as StatusAnswer));
  try {
    return await withStore(root, async (store) => {
      const ids = (records: readonly RequestRecord[]) => records.map((r) => r.request_id).sort();
      const stored = spec.request === undefined ? undefined : await store.get(spec.request);
      if (stored !== undefined && !isProtocolRecord(stored)) throw new Error('a sequence left a legacy record');
      const record = stored;
      const history = spec.request === undefined ? undefined : await store.history(spec.request);
      const byJid = record === undefined ? undefined : await store.getByJid(record.jid);
      const all = ids(await store.list());
      const unresolved = ids(await store.list({ unresolved: true }));
      const blockers = ids(await store.withTarget(MINION_A, (u) => u.blockers()));
      let sameJid: string | undefined;
      if (record !== undefined) {
        const other = prepared('3f405162-7c8d-4e9f-a0b1-c2d3e4f5a6b7', MINION_B, record.jid);
        const created = await store.withTarget(MINION_B, (u) => u.create(other));
        sameJid = created.created ? 'created' : created.reason;
      }
      const deps = { store, salt, now: () => new Date(AT), callTimeoutMs: 1_000 };
      if (record?.state === 'prepared') await publishPending(deps, { requestId: record.request_id });
      const polled = record === undefined ? undefined : (await poll(deps, record.request_id)).record;
      const blockersAfter = ids(await store.withTarget(MINION_A, (u) => u.blockers()));
      return {
        open,
        migrated,
        ...(record === undefined ? {} : { record }),
        ...(history === undefined ? {} : { history }),
        ...(byJid === undefined ? {} : { byJid }),
        all,
        unresolved,
        blockers,
        ...(sameJid === undefined ? {} : { sameJid }),
        publications: salt.publications,
        ...(polled === undefined ? {} : { polled }),
        blockersAfter,
      };
    });
  } catch (error) {
    return { open, migrated, all: [], unresolved: [], blockers: [], publications: salt.publications, blockersAfter: [], error: codeOf(error) };
  }
}

function versionOf(spec: MasterSequenceSpec, record: RequestRecord | undefined): string {
  if (record === undefined) return 'absent';
  for (const [name, version] of Object.entries(spec.versions)) if (isDeepStrictEqual(record, version)) return name;
  return `other:${record.state}`;
}

function judgeMaster(spec: MasterSequenceSpec, outcome: MasterOutcome, position: Position): string[] {
  const problems: string[] = [];
  const finished = position.after === 'done';
  if (outcome.open !== 'ok') {
    const allowed = spec.migration === true && !finished && outcome.open === 'error:store_format/needs_migration';
    if (!allowed) problems.push(`the store did not open: ${outcome.open}`);
  }
  if (spec.migration === true && finished && outcome.migrated === true) problems.push('a finished migration is asked for again');
  if (outcome.error !== undefined) return [...problems, `recovery failed: ${outcome.error}`];
  if (outcome.open !== 'ok' && outcome.migrated !== true) return problems;
  const view = versionOf(spec, outcome.record);
  const allowed = new Set([...(spec.table[position.after] ?? []), ...(spec.table[position.before] ?? [])]);
  if (spec.request !== undefined && !allowed.has(view)) problems.push(`the record is ${view}; allowed here: ${[...allowed].join(', ')}`);
  const record = outcome.record;
  // The history and the record are one write: its last entry is the record's last change, never one ahead or behind.
  if (record === undefined && outcome.history !== undefined) problems.push('a history exists without its record');
  const last = outcome.history?.entries.at(-1);
  if (record !== undefined && isProtocolRecord(record) && last !== undefined && (last.to_state !== record.state || last.at !== record.updated_at)) {
    problems.push(`the history's last entry (${last.to_state} at ${last.at}) is not the record's last change (${record.state} at ${record.updated_at})`);
  }
  if (record !== undefined) {
    const id = record.request_id;
    if (!outcome.all.includes(id)) problems.push('list() does not return the record');
    if (!isDeepStrictEqual(outcome.byJid, record)) problems.push('getByJid does not return the record that holds the JID');
    if (outcome.sameJid !== 'jid_taken') problems.push(`the record's JID was not reserved: a create with it answered ${outcome.sameJid}`);
    const blocking = isBlocking(record);
    if (blocking !== outcome.blockers.includes(id)) problems.push(`the target's blockers ${blocking ? 'miss a ' : 'hold a non-'}blocking record`);
    if (blocking !== outcome.unresolved.includes(id)) problems.push(`the unresolved list ${blocking ? 'misses a ' : 'holds a non-'}blocking record`);
    const wasPrepared = record.state === 'prepared';
    if (outcome.publications !== (wasPrepared ? 1 : 0)) problems.push(`publish-pending published ${outcome.publications} time(s) a ${record.state} record`);
    if (spec.afterPoll !== undefined) {
      const polled = outcome.polled;
      const counts = polled !== undefined && isProtocolRecord(polled) ? `${polled.passed}/${polled.total}` : '';
      if (polled?.state !== spec.afterPoll.state || counts !== `${spec.afterPoll.passed}/${spec.afterPoll.total}`) {
        problems.push(`after a poll the record is ${polled?.state ?? 'missing'} ${counts}, not ${spec.afterPoll.state}`);
      }
      if (!isBlocking(polled ?? record) && outcome.blockersAfter.includes(id)) problems.push('a settled record still blocks its target');
    }
  } else if (outcome.publications !== 0) problems.push('publish-pending published a request without a record');
  for (const [id, { blocks, minionId }] of Object.entries(spec.others)) {
    if (!outcome.all.includes(id)) problems.push(`the record ${id} that existed before was lost`);
    if (blocks && !outcome.unresolved.includes(id)) problems.push(`the blocking record ${id} is missing from the unresolved index`);
    if (!blocks && outcome.unresolved.includes(id)) problems.push(`the settled record ${id} is listed unresolved`);
    if (minionId === MINION_A && blocks !== outcome.blockers.includes(id)) problems.push(`the target's blockers are wrong about ${id}`);
  }
  if (outcome.blockers.length > 1) problems.push(`more than one unresolved request on one target: ${outcome.blockers.join(', ')}`);
  return problems;
}

async function createIn(root: string, records: readonly RequestRecord[]): Promise<void> {
  await withStore(root, async (store) => {
    for (const record of records) {
      if (!isProtocolRecord(record)) throw new Error('setup makes protocol records only');
      const created = await store.withTarget(record.minion_id, (u) => u.create(prepared(record.request_id, record.minion_id, record.jid)));
      if (!created.created) throw new Error(`setup could not create ${record.request_id}`);
      if (record.state !== 'prepared') await store.updateRequest(record.request_id, () => record, { event: 'observed', source: 'poller' });
    }
  });
}

/** A store as a release before the format marker left it: records and JIDs only (version 0). */
function asVersionZero(root: string): void {
  for (const name of ['format.json', 'targets', 'unbound', 'unresolved']) rmSync(join(root, name), { recursive: true, force: true });
}

const base = prepared();
const earlierOfB = prepared(EARLIER, MINION_B, '20261129090000000001');
const settledOfA = prepared(SETTLED, MINION_A, '20261129080000000001');

export const MASTER_SEQUENCES: readonly MasterSequenceSpec[] = [
  {
    name: 'master store: open a new store',
    setup: () => Promise.resolve(),
    work: async (root, mark) => {
      await withStore(root, () => Promise.resolve());
      mark('done');
    },
    table: {},
    versions: {},
    others: {},
  },
  {
    name: 'master store: create a request (first of its target)',
    setup: async (root) => createIn(root, []),
    work: async (root, mark) => {
      const store = await createFileRecordStore({ root, crashAt: mark });
      await store.withTarget(MINION_A, (u) => u.create(base));
      await store.close();
      mark('done');
    },
    request: REQUEST,
    table: { start: ['absent'], S1: ['absent'], S2: ['absent'], S3: ['absent'], done: ['prepared'], end: ['prepared'] },
    versions: { prepared: base },
    minion: answer(base, 'not_started'),
    others: {},
  },
  {
    name: 'master store: create a request (target with history)',
    setup: async (root) => createIn(root, [succeeded(settledOfA), running(earlierOfB)]),
    work: async (root, mark) => {
      const store = await createFileRecordStore({ root, crashAt: mark });
      await store.withTarget(MINION_A, (u) => u.create(base));
      await store.close();
      mark('done');
    },
    request: REQUEST,
    table: { start: ['absent'], S1: ['absent'], S2: ['absent'], S3: ['absent'], done: ['prepared'], end: ['prepared'] },
    versions: { prepared: base },
    minion: answer(base, 'not_started'),
    others: { [SETTLED]: { blocks: false, minionId: MINION_A }, [EARLIER]: { blocks: true, minionId: MINION_B } },
  },
  {
    name: 'master store: record the publish intent',
    setup: async (root) => createIn(root, [base]),
    work: async (root, mark) => {
      const store = await createFileRecordStore({ root, crashAt: mark });
      await store.updateRequest(REQUEST, publishing, { event: 'observed', source: 'poller' });
      await store.close();
      mark('done');
    },
    request: REQUEST,
    table: { start: ['prepared'], S4: ['publishing'], done: ['publishing'], end: ['publishing'] },
    versions: { prepared: base, publishing: publishing(base) },
    minion: answer(base, 'not_started'),
    others: {},
  },
  {
    name: 'master store: commit a terminal receipt',
    setup: async (root) => createIn(root, [running(base)]),
    work: async (root, mark) => {
      const store = await createFileRecordStore({ root, crashAt: mark });
      await store.updateRequest(REQUEST, () => succeeded(base), { event: 'observed', source: 'poller' });
      await store.close();
      mark('done');
    },
    request: REQUEST,
    table: { start: ['running'], S4: ['succeeded'], done: ['succeeded'], end: ['succeeded'] },
    versions: { running: running(base), succeeded: succeeded(base) },
    minion: answer(base, 'succeeded', 2, 2),
    afterPoll: { state: 'succeeded', passed: 2, total: 2 },
    others: {},
  },
  {
    name: 'migrate-store: index a store of an older release',
    setup: async (root) => {
      await createIn(root, [running(base), succeeded(earlierOfB)]);
      asVersionZero(root);
    },
    work: async (root, mark) => {
      await migrateFileRecordStore({ root, crashAt: mark });
      mark('done');
    },
    table: {},
    versions: {},
    others: { [REQUEST]: { blocks: true, minionId: MINION_A }, [EARLIER]: { blocks: false, minionId: MINION_B } },
    migration: true,
  },
  {
    name: 'migrate-store: repair a current store (a stale unresolved entry)',
    setup: async (root) => {
      await createIn(root, [running(base), succeeded(earlierOfB)]);
      // What a crash at S4 leaves: the entry of a record that stopped blocking.
      mkdirSync(join(root, 'unresolved', MINION_B), { recursive: true, mode: 0o700 });
      const entry = join(root, 'unresolved', MINION_B, `${EARLIER}.json`);
      writeFileSync(entry, JSON.stringify({ request_id: EARLIER, minion_id: MINION_B }), { mode: 0o600 });
      chmodSync(entry, 0o600);
    },
    work: async (root, mark) => {
      await migrateFileRecordStore({ root, crashAt: mark });
      mark('done');
    },
    table: {},
    versions: {},
    others: { [REQUEST]: { blocks: true, minionId: MINION_A }, [EARLIER]: { blocks: false, minionId: MINION_B } },
    migration: true,
  },
];

export function masterSequence(spec: MasterSequenceSpec): Sequence<MasterContext, MasterOutcome> {
  return {
    name: spec.name,
    async record(workdir: string): Promise<Recorded<MasterContext>> {
      const baseDir = join(workdir, 'base');
      mkdirSync(baseDir, { recursive: true, mode: 0o700 });
      const root = join(baseDir, 'store');
      await spec.setup(root);
      const initial = FsImage.snapshot(baseDir, new Set([MILESTONE_DIR]));
      const mark = (name: string): void => void statSync(join(baseDir, MILESTONE_DIR, name), { throwIfNoEntry: false });
      const { calls } = await traceSelf(() => spec.work(root, mark));
      const umask = currentUmask();
      const recording = toOperations(calls, { base: baseDir, initial, umask, uid: process.geteuid?.() ?? 0, gid: process.getegid?.() ?? 0 });
      return { recording, context: { spec } };
    },
    async recover(dirs: readonly string[]): Promise<MasterOutcome[]> {
      const outcomes: MasterOutcome[] = [];
      for (const dir of dirs) outcomes.push(await recoverOne(join(dir, 'store'), spec));
      return outcomes;
    },
    judge: (outcome, position) => judgeMaster(spec, outcome, position),
    label: (outcome) => {
      if (outcome.error !== undefined) return 'error';
      const opened = outcome.open === 'ok' ? 'opened' : `${outcome.open.replace('error:', '')}, migrated again`;
      return spec.request === undefined ? opened : `${opened}: ${versionOf(spec, outcome.record)}`;
    },
  };
}
