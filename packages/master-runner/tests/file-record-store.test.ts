import { POLLABLE_STATES, applyEvent, createRequestRecord, type ProtocolRequestRecord, type RequestRecord } from '@oduflow/protocol';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dispatch } from '../src/dispatch.js';
import { createFileRecordStore } from '../src/file-record-store.js';
import { migrateFileRecordStore } from '../src/migrate-store.js';
import { poll } from '../src/poll.js';
import { preflight } from '../src/preflight.js';
import { reconcile } from '../src/reconcile.js';
import type { MasterDeps } from '../src/deps.js';
import type { RecordStore } from '../src/record-store.js';
import { MINION, OTHER_MINION, REQUEST_A, REQUEST_B, makeWorld, scratchDir, type World, refusal } from './support/harness.js';

function plant(world: World, dir: 'requests' | 'jids', name: string, value: unknown): void {
  plantAt(world.storeRoot, dir, name, value);
}

function plantAt(root: string, dir: string, name: string, value: unknown): void {
  const path = join(root, dir, name);
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value), { mode: 0o600 });
  chmodSync(path, 0o600);
}

describe('opening the store', () => {
  it('refuses a store directory that is a symlink and writes nothing', async () => {
    const { dir, remove } = scratchDir();
    try {
      mkdirSync(join(dir, 'real'), { mode: 0o700 });
      symlinkSync(join(dir, 'real'), join(dir, 'store'));
      const error = await refusal(createFileRecordStore({ root: join(dir, 'store') }));
      expect(error.code).toBe('store_unsafe');
      expect(readdirSync(join(dir, 'real'))).toEqual([]);
    } finally {
      remove();
    }
  });

  it('refuses a store directory others can read', async () => {
    const { dir, remove } = scratchDir();
    try {
      mkdirSync(join(dir, 'store'), { mode: 0o755 });
      chmodSync(join(dir, 'store'), 0o755);
      expect((await refusal(createFileRecordStore({ root: join(dir, 'store') }))).code).toBe('store_unsafe');
      expect(readdirSync(join(dir, 'store'))).toEqual([]);
    } finally {
      remove();
    }
  });

  it('closes every directory it opened when a later one is refused (no descriptor leak)', async () => {
    const { dir, remove } = scratchDir();
    try {
      const root = join(dir, 'store');
      await (await createFileRecordStore({ root })).close();
      // `locks` is opened last: `requests` and `jids` are already open when it is refused.
      mkdirSync(join(dir, 'elsewhere'), { mode: 0o700 });
      rmSync(join(root, 'locks'), { recursive: true });
      symlinkSync(join(dir, 'elsewhere'), join(root, 'locks'));
      const openFds = (): number => readdirSync('/proc/self/fd').length;
      expect((await refusal(createFileRecordStore({ root }))).code).toBe('store_unsafe');
      const before = openFds();
      for (let i = 0; i < 25; i += 1) {
        expect((await refusal(createFileRecordStore({ root }))).code).toBe('store_unsafe');
      }
      expect(openFds() - before).toBeLessThan(5);
    } finally {
      remove();
    }
  });

  it('with create: false, refuses a missing or empty store directory with not_found and creates nothing', async () => {
    const { dir, remove } = scratchDir();
    try {
      const missing = join(dir, 'missing');
      expect(await refusal(createFileRecordStore({ root: missing, create: false }))).toMatchObject({ code: 'not_found', detail: 'no_store' });
      expect(existsSync(missing)).toBe(false);
      const empty = join(dir, 'empty');
      mkdirSync(empty, { mode: 0o700 });
      expect(await refusal(createFileRecordStore({ root: empty, create: false }))).toMatchObject({ code: 'not_found', detail: 'no_store' });
      expect(readdirSync(empty)).toEqual([]);
      await (await createFileRecordStore({ root: empty })).close();
      await (await createFileRecordStore({ root: empty, create: false })).close();
    } finally {
      remove();
    }
  });

  it('marks a new store with the format marker, so a new install needs no migration step', async () => {
    const { dir, remove } = scratchDir();
    try {
      const root = join(dir, 'store');
      await (await createFileRecordStore({ root })).close();
      expect(JSON.parse(readFileSync(join(root, 'format.json'), 'utf8'))).toEqual({ format: 'oduflow-master-file-store', version: 2 });
      // An empty directory left by an older release (no record, no JID) is marked the same way.
      const older = join(dir, 'older');
      for (const sub of ['', 'requests', 'jids', 'locks']) mkdirSync(join(older, sub), { mode: 0o700 });
      await (await createFileRecordStore({ root: older, create: false })).close();
      expect(existsSync(join(older, 'format.json'))).toBe(true);
    } finally {
      remove();
    }
  });

  it('opens a marked store without reading a record or sweeping a directory', async () => {
    const world = await makeWorld();
    try {
      await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
      // Any read of this record fails (store_corrupt), and any sweep removes the dead writer's temp file.
      plant(world, 'requests', `${REQUEST_B}.json`, '{"protocol":1,');
      writeFileSync(join(world.storeRoot, 'requests', '.tmp-dead'), '{', { mode: 0o600 });
      const reopened = await createFileRecordStore({ root: world.storeRoot });
      expect((await reopened.get(REQUEST_A))?.state).toBe('published');
      await reopened.close();
      expect(readdirSync(join(world.storeRoot, 'requests'))).toContain('.tmp-dead');
    } finally {
      await world.close();
    }
  });

  it('refuses a store of an older layout with store_format, naming migrate-store, and writes no index or marker', async () => {
    const { dir, remove } = scratchDir();
    try {
      const root = join(dir, 'store');
      for (const sub of ['', 'requests', 'jids']) mkdirSync(join(root, sub), { mode: 0o700 });
      const record = createRequestRecord({ request_id: REQUEST_A, minion_id: MINION, profile: 'configure', state_digest: '', jid: '20261129100000000000', at: 'x' });
      plantAt(root, 'requests', `${REQUEST_A}.json`, record);
      plantAt(root, 'jids', '20261129100000000000.json', { request_id: REQUEST_A, minion_id: MINION });
      for (const create of [true, false]) {
        const error = await refusal(createFileRecordStore({ root, create }));
        expect(error).toMatchObject({ code: 'store_format', detail: 'needs_migration' });
        expect(error.message).toContain('oduflow-master migrate-store');
        expect(error.message).not.toContain(MINION);
      }
      expect(existsSync(join(root, 'format.json'))).toBe(false);
      expect(readdirSync(join(root, 'unresolved'))).toEqual([]);
      expect(readdirSync(join(root, 'targets'))).toEqual([]);
    } finally {
      remove();
    }
  });

  it('refuses a store whose format marker it does not know and leaves it untouched', async () => {
    const { dir, remove } = scratchDir();
    try {
      const root = join(dir, 'store');
      await (await createFileRecordStore({ root })).close();
      plantAt(root, '', 'format.json', { format: 'oduflow-master-file-store', version: 3 });
      expect(await refusal(createFileRecordStore({ root }))).toMatchObject({ code: 'store_format', detail: 'unknown_format' });
      expect(await refusal(migrateFileRecordStore({ root }))).toMatchObject({ code: 'store_format', detail: 'unknown_format' });
      expect(JSON.parse(readFileSync(join(root, 'format.json'), 'utf8'))).toMatchObject({ version: 3 });
    } finally {
      remove();
    }
  });

  it('refuses a relative store path', async () => {
    expect((await refusal(createFileRecordStore({ root: 'relative/store' }))).code).toBe('config_invalid');
  });

  it('creates the layout private and finds its records again after reopening', async () => {
    const world = await makeWorld();
    try {
      await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
      const reopened = await createFileRecordStore({ root: world.storeRoot });
      expect(await reopened.get(REQUEST_A)).toEqual(await world.store.get(REQUEST_A));
      await reopened.close();
      expect(readdirSync(world.storeRoot).sort()).toEqual(['format.json', 'jids', 'keys', 'locks', 'outbox', 'requests', 'targets', 'unbound', 'unresolved']);
      expect(readdirSync(join(world.storeRoot, 'targets', MINION))).toEqual([`${REQUEST_A}.json`]);
      expect(readdirSync(join(world.storeRoot, 'unresolved', MINION))).toEqual([`${REQUEST_A}.json`]);
      expect(statSync(join(world.storeRoot, 'format.json')).mode & 0o777).toBe(0o600);
    } finally {
      await world.close();
    }
  });
});

describe('records at rest', () => {
  let world: World;
  const opened: RecordStore[] = [];
  beforeEach(async () => {
    world = await makeWorld();
  });
  afterEach(async () => {
    for (const store of opened.splice(0)) await store.close();
    await world.close();
  });

  /** Deps on the store after migrate-store, the step that indexes records planted at rest (e.g. restored from a backup). */
  async function reopen(): Promise<MasterDeps> {
    await migrateFileRecordStore({ root: world.storeRoot });
    const store = await createFileRecordStore({ root: world.storeRoot, lockWaitMs: 10_000 });
    opened.push(store);
    return { ...world.deps, store };
  }

  it('stops with store_corrupt on a damaged protocol 1 record instead of misreading it', async () => {
    plant(world, 'requests', `${REQUEST_A}.json`, { protocol: 1, request_id: REQUEST_A, state: 'succeeded' });
    const deps = await reopen();
    expect((await refusal(deps.store.get(REQUEST_A))).code).toBe('store_corrupt');
    // Its target cannot be read: indexed as unbound and unresolved for every target, it stops every dispatch (fail closed).
    expect(readdirSync(join(world.storeRoot, 'unbound'))).toEqual([`${REQUEST_A}.json`]);
    expect(readdirSync(join(world.storeRoot, 'unresolved', '_unbound'))).toEqual([`${REQUEST_A}.json`]);
    expect((await refusal(dispatch(deps, { minionId: MINION, profile: 'configure' }))).code).toBe('store_corrupt');
    expect((await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('store_corrupt');
    expect(world.standIn.publications).toHaveLength(0);
  });

  it('stops with store_corrupt on a record that is not JSON', async () => {
    plant(world, 'requests', `${REQUEST_A}.json`, '{"protocol":1,');
    expect((await refusal(world.store.get(REQUEST_A))).code).toBe('store_corrupt');
  });

  it('keeps a request history in the record file itself, beside the record, so a transition costs no extra write', async () => {
    const result = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const onDisk = JSON.parse(readFileSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`), 'utf8')) as Record<string, unknown>;
    const { oduflow_history: history, ...fields } = onDisk;
    expect(fields).toEqual(result.record);
    expect(history).toEqual(await world.store.history(REQUEST_A));
    expect((await world.store.history(REQUEST_A))?.entries.map((e) => [e.seq, e.event, e.source, e.to_state])).toEqual([
      [1, 'created', 'dispatch', 'prepared'],
      [2, 'intent_recorded', 'dispatch', 'publishing'],
      [3, 'publish_acked', 'dispatch', 'published'],
    ]);
  });

  it('reads a record file written before histories as "history not kept", and keeps one from its next change on', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const path = join(world.storeRoot, 'requests', `${REQUEST_A}.json`);
    const { oduflow_history: _dropped, ...older } = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    plant(world, 'requests', `${REQUEST_A}.json`, older);
    expect(await world.store.get(REQUEST_A)).toEqual(older);
    expect(await world.store.history(REQUEST_A)).toEqual({ entries: [], dropped: 0 });
    await reconcile(world.deps, REQUEST_A, { reason: 'checked', actor: 'ops' });
    expect((await world.store.history(REQUEST_A))?.entries.map((e) => [e.seq, e.from_state, e.to_state, e.source])).toEqual([[1, 'published', 'reconciled', 'reconcile']]);
  });

  it('stops with store_corrupt on a damaged history, and refuses to extend it, while the record still reads', async () => {
    const result = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const onDisk = JSON.parse(readFileSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`), 'utf8')) as Record<string, unknown>;
    plant(world, 'requests', `${REQUEST_A}.json`, { ...onDisk, oduflow_history: { entries: [{ seq: 1, note: 'hand edited' }], dropped: 0 } });
    expect(await world.store.get(REQUEST_A)).toEqual(result.record);
    expect((await refusal(world.store.history(REQUEST_A))).code).toBe('store_corrupt');
    expect((await refusal(reconcile(world.deps, REQUEST_A, { reason: 'checked', actor: 'ops' }))).code).toBe('store_corrupt');
    expect((await world.store.get(REQUEST_A))?.state).toBe('published');
  });

  it('burns a JID whose record was never written (crash between the two create writes) and does not block', async () => {
    plant(world, 'jids', '20261129100000000000.json', { request_id: REQUEST_B, minion_id: MINION });
    const frozen = () => new Date('2026-11-29T10:00:00.000Z');
    const result = await dispatch({ ...world.deps, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(result.record).toMatchObject({ state: 'published', jid: '20261129100000000001' });
    expect(await world.store.get(REQUEST_B)).toBeUndefined();
  });

  it('loads a record without protocol 1 as legacy, keeps its fields and blocks its target', async () => {
    const original = { minion_id: MINION, fun: 'state.apply', status: 'dispatched', jid: '20251001000000000000' };
    plant(world, 'requests', 'old-dispatch-17.json', original);
    const deps = await reopen();
    expect(readdirSync(join(world.storeRoot, 'targets', MINION))).toEqual(['old-dispatch-17.json']);
    const legacy = await deps.store.get('old-dispatch-17');
    expect(legacy).toMatchObject({ protocol: null, state: 'legacy', minion_id: MINION, jid: '20251001000000000000', legacy_fields: original });
    expect((await refusal(dispatch(deps, { minionId: MINION, profile: 'configure' }))).code).toBe('target_blocked');
    expect((await dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' })).outcome).toBe('published');

    const report = await preflight(deps);
    expect(report.clean).toBe(false);
    expect(report.legacy.map((r) => r.request_id)).toEqual(['old-dispatch-17']);

    await reconcile(deps, 'old-dispatch-17', { reason: 'old run checked on the host', actor: 'ops' });
    const onDisk = JSON.parse(readFileSync(join(world.storeRoot, 'requests', 'old-dispatch-17.json'), 'utf8')) as Record<string, unknown>;
    expect(onDisk).toMatchObject(original);
    expect(onDisk['oduflow_reconciliation']).toMatchObject({ reason: 'old run checked on the host', actor: 'ops' });
    expect((await deps.store.get('old-dispatch-17'))?.state).toBe('reconciled');
    // Its history starts at the reconciliation (the original fields never held one) and stays out of legacy_fields.
    expect((await deps.store.history('old-dispatch-17'))?.entries).toMatchObject([{ seq: 1, from_state: 'legacy', to_state: 'reconciled', event: 'reconciled', source: 'reconcile' }]);
    expect((await deps.store.get('old-dispatch-17')) as { legacy_fields: object }).not.toHaveProperty('legacy_fields.oduflow_history');
    expect((await preflight(deps)).clean).toBe(true);
    expect((await dispatch(deps, { minionId: MINION, profile: 'configure' })).outcome).toBe('published');
  });

  it('lets a legacy record that names no target block every target (fail closed)', async () => {
    plant(world, 'requests', 'mystery.json', { status: 'sent' });
    const deps = await reopen();
    expect(readdirSync(join(world.storeRoot, 'unbound'))).toEqual(['mystery.json']);
    expect((await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('target_blocked');
  });

  it('stops reading a legacy record that names no target once it is reconciled', async () => {
    plant(world, 'requests', 'mystery.json', { status: 'sent' });
    const deps = await reopen();
    expect(readdirSync(join(world.storeRoot, 'unresolved', '_unbound'))).toEqual(['mystery.json']);
    await reconcile(deps, 'mystery', { reason: 'old run checked', actor: 'ops' });
    expect(readdirSync(join(world.storeRoot, 'unresolved', '_unbound'))).toEqual([]);
    // Damaged now, it would stop every dispatch if the blocking check still read it.
    plant(world, 'requests', 'mystery.json', '{"protocol":');
    expect((await dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' })).outcome).toBe('published');
  });

  it('reports active unresolved requests in preflight', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const report = await preflight(world.deps);
    expect(report).toMatchObject({ clean: true, legacy: [] });
    expect(report.unresolved.map((r) => [r.request_id, r.state])).toEqual([[REQUEST_A, 'publishing']]);
  });

  it('never writes state data, tokens or passwords into the store', async () => {
    await dispatch(world.deps, {
      minionId: MINION,
      profile: 'custom',
      requestId: REQUEST_A,
      stateDataJson: '{"x":{"file.managed":[{"contents":"pw-in-state-data"}]}}',
    });
    for (const dir of ['requests', 'jids']) {
      for (const name of readdirSync(join(world.storeRoot, dir))) {
        const text = readFileSync(join(world.storeRoot, dir, name), 'utf8');
        expect(text).not.toContain('pw-in-state-data');
        expect(text).not.toContain(world.standIn.password);
      }
    }
  });

  it('keeps record files private (0600)', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const path = join(world.storeRoot, 'requests', `${REQUEST_A}.json`);
    expect(existsSync(path)).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('creates only records of the target the unit holds', async () => {
    const foreign = createRequestRecord({ request_id: REQUEST_A, minion_id: OTHER_MINION, profile: 'configure', state_digest: '', jid: '20261129100000000000', at: 'x' });
    expect((await refusal(world.store.withTarget(MINION, (unit) => unit.create(foreign)))).code).toBe('internal');
  });
});

describe('the indexes', () => {
  let world: World;
  const opened: RecordStore[] = [];
  beforeEach(async () => {
    world = await makeWorld();
  });
  afterEach(async () => {
    for (const store of opened.splice(0)) await store.close();
    await world.close();
  });

  async function reopen(options: { crashAt?: (point: string) => void } = {}): Promise<MasterDeps> {
    const store = await createFileRecordStore({ root: world.storeRoot, lockWaitMs: 10_000, ...options });
    opened.push(store);
    return { ...world.deps, store };
  }

  const entries = (...path: string[]): string[] => {
    const dir = join(world.storeRoot, ...path);
    return existsSync(dir) ? readdirSync(dir).sort() : [];
  };
  const frozen = () => new Date('2026-11-29T10:00:00.000Z');

  it('indexes a blocking request as unresolved and drops the entry once it is settled', async () => {
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('published');
    expect(entries('unresolved', MINION)).toEqual([`${REQUEST_A}.json`]);
    expect((await poll(world.deps, REQUEST_A)).record.state).toBe('succeeded');
    expect(entries('unresolved', MINION)).toEqual([]);
    expect(entries('targets', MINION)).toEqual([`${REQUEST_A}.json`]);
  });

  it('never indexes a request rejected at creation as unresolved', async () => {
    world.standIn.capabilities = () => ({ retcode: 0, ret: false });
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('rejected');
    expect(entries('unresolved', MINION)).toEqual([]);
    expect(entries('targets', MINION)).toEqual([`${REQUEST_A}.json`]);
  });

  it('lists unresolved and pollable requests from the unresolved index alone (a damaged settled record is not read)', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    world.standIn.publishMode = 'ack';
    await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B });
    await poll(world.deps, REQUEST_B);
    plant(world, 'requests', `${REQUEST_B}.json`, '{"protocol":1,');
    expect((await world.store.list({ unresolved: true })).map((r) => r.request_id)).toEqual([REQUEST_A]);
    expect((await world.store.list({ states: POLLABLE_STATES })).map((r) => r.request_id)).toEqual([REQUEST_A]);
    expect((await world.store.list({ minionId: MINION, unresolved: true })).map((r) => r.request_id)).toEqual([REQUEST_A]);
    expect(await world.store.list({ minionId: OTHER_MINION, unresolved: true })).toEqual([]);
    // Listing everything does read it, and says so.
    expect((await refusal(world.store.list())).code).toBe('store_corrupt');
    expect((await refusal(world.store.list({ states: ['succeeded'] }))).code).toBe('store_corrupt');
  });

  it('decides a target from its own unresolved records only (a damaged record of another target is not read)', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B });
    world.standIn.publishMode = 'ack';
    // Damage OTHER_MINION's record after it was indexed there.
    plant(world, 'requests', `${REQUEST_B}.json`, { protocol: 1, request_id: REQUEST_B, state: 'succeeded' });
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure' })).outcome).toBe('published');
    expect((await refusal(dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('store_corrupt');
  });

  it('S1 (JID reserved, index not): nothing blocks and the JID stays burned', async () => {
    const interrupted = new Error('S1');
    const crashing = await reopen({
      crashAt: (point) => {
        if (point === 'S1') throw interrupted;
      },
    });
    await expect(dispatch({ ...crashing, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).rejects.toBe(interrupted);
    expect(existsSync(join(world.storeRoot, 'targets', MINION))).toBe(false);
    const deps = await reopen();
    const again = await dispatch({ ...deps, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_B });
    expect(again.record).toMatchObject({ state: 'published', jid: '20261129100000000001' });
  });

  for (const point of ['S2', 'S3'] as const) {
    it(`${point} (index entries written, record not): the target is not blocked, the JID stays burned, the request can be dispatched again`, async () => {
      const interrupted = new Error(point);
      const crashing = await reopen({
        crashAt: (at) => {
          if (at === point) throw interrupted;
        },
      });
      await expect(dispatch({ ...crashing, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).rejects.toBe(interrupted);
      expect(existsSync(join(world.storeRoot, 'jids', '20261129100000000000.json'))).toBe(true);
      expect(entries('targets', MINION)).toEqual([`${REQUEST_A}.json`]);
      expect(entries('unresolved', MINION)).toEqual(point === 'S3' ? [`${REQUEST_A}.json`] : []);
      expect(existsSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`))).toBe(false);
      expect(world.standIn.publications).toHaveLength(0);

      const deps = await reopen();
      expect(await deps.store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
      expect(await deps.store.list({ unresolved: true })).toEqual([]);
      const again = await dispatch({ ...deps, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
      expect(again.record).toMatchObject({ state: 'published', jid: '20261129100000000001' });
      expect(await refusal(dispatch(deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_B }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_A });
      expect(world.standIn.publicationsUnder('20261129100000000000')).toBe(0);
    });
  }

  it('S4 (record settled, its unresolved entry not yet removed): the target is free, and migrate-store drops the leftover', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const interrupted = new Error('S4');
    const crashing = await reopen({
      crashAt: (point) => {
        if (point === 'S4') throw interrupted;
      },
    });
    await expect(reconcile(crashing, REQUEST_A, { reason: 'checked', actor: 'ops' })).rejects.toBe(interrupted);
    expect((await world.store.get(REQUEST_A))?.state).toBe('reconciled');
    expect(entries('unresolved', MINION)).toEqual([`${REQUEST_A}.json`]);

    expect(await world.store.list({ unresolved: true })).toEqual([]);
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_B })).outcome).toBe('published');
    const report = await migrateFileRecordStore({ root: world.storeRoot });
    expect(report).toMatchObject({ wasCurrent: true, records: 2, unresolved: 1, staleEntriesRemoved: 1, unresolvedEntriesWritten: 0 });
    expect(entries('unresolved', MINION)).toEqual([`${REQUEST_B}.json`]);
  });

  it('writes the unresolved entry before a record that starts blocking again (never one too few)', async () => {
    world.standIn.capabilities = () => ({ retcode: 0, ret: false });
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(entries('unresolved', MINION)).toEqual([]);
    // No event does this today (settled states are terminal); the store must not depend on it.
    const interrupted = new Error('S4');
    const crashing = await reopen({
      crashAt: (point) => {
        if (point === 'S4') throw interrupted;
      },
    });
    const blockingAgain = (r: RequestRecord): RequestRecord => ({ ...(r as ProtocolRequestRecord), state: 'unknown', reason: { code: 'unknown', cause: 'status_unknown' } });
    await expect(crashing.store.updateRequest(REQUEST_A, blockingAgain, { event: 'observed', source: 'poller' })).rejects.toBe(interrupted);
    expect(entries('unresolved', MINION)).toEqual([`${REQUEST_A}.json`]);
    expect((await refusal(dispatch(world.deps, { minionId: MINION, profile: 'configure' }))).code).toBe('target_blocked');
  });

  it('creates no lock file named from a request id without a record or from an invalid minion id', async () => {
    const deps = await reopen();
    expect(await refusal(deps.store.updateRequest('bad', (r) => r, { event: 'observed', source: 'poller' }))).toMatchObject({ code: 'not_found' });
    expect(await refusal(reconcile(deps, REQUEST_A, { reason: 'x', actor: 'ops' }))).toMatchObject({ code: 'not_found' });
    expect(await refusal(deps.store.withTarget('../escape', () => Promise.resolve(undefined)))).toMatchObject({ code: 'invalid_input' });
    expect(await deps.store.list({ minionId: '../escape', unresolved: true })).toEqual([]);
    expect(readdirSync(join(world.storeRoot, 'locks')).filter((n) => n.startsWith('request-') || n.includes('escape'))).toEqual([]);
  });
});

describe('migrate-store', () => {
  let world: World;
  beforeEach(async () => {
    world = await makeWorld();
  });
  afterEach(async () => {
    await world.close();
  });

  const entries = (...path: string[]): string[] => {
    const dir = join(world.storeRoot, ...path);
    return existsSync(dir) ? readdirSync(dir).sort() : [];
  };

  async function withStore<T>(work: (deps: MasterDeps) => Promise<T>): Promise<T> {
    const store = await createFileRecordStore({ root: world.storeRoot, lockWaitMs: 10_000 });
    try {
      return await work({ ...world.deps, store });
    } finally {
      await store.close();
    }
  }

  /** REQUEST_A blocking MINION (publishing), REQUEST_B on OTHER_MINION settled, a legacy record naming no target. */
  async function history(): Promise<void> {
    world.standIn.publishMode = 'error_500';
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('publishing');
    world.standIn.publishMode = 'ack';
    expect((await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B })).outcome).toBe('published');
    await reconcile(world.deps, REQUEST_B, { reason: 'checked on the host', actor: 'ops' });
    plant(world, 'requests', 'mystery.json', { status: 'sent' });
  }

  /** The layout before any index (version 0): records and JIDs only. */
  function toVersion0(): void {
    for (const name of ['targets', 'unbound', 'unresolved', 'format.json']) rmSync(join(world.storeRoot, name), { recursive: true });
  }

  /** The layout of the first indexed release (version 1): targets/ and unbound/, no marker, no unresolved index. */
  function toVersion1(): void {
    for (const name of ['unresolved', 'format.json']) rmSync(join(world.storeRoot, name), { recursive: true });
    plant(world, 'requests', 'mystery.json', { status: 'sent' });
    writeFileSync(join(world.storeRoot, 'unbound', 'mystery.json'), JSON.stringify({ request_id: 'mystery', minion_id: null }), { mode: 0o600 });
  }

  async function checkMigrated(): Promise<void> {
    expect(entries('targets', MINION)).toEqual([`${REQUEST_A}.json`]);
    expect(entries('targets', OTHER_MINION)).toEqual([`${REQUEST_B}.json`]);
    expect(entries('unbound')).toEqual(['mystery.json']);
    expect(entries('unresolved', MINION)).toEqual([`${REQUEST_A}.json`]);
    expect(entries('unresolved', OTHER_MINION)).toEqual([]);
    expect(entries('unresolved', '_unbound')).toEqual(['mystery.json']);
    await withStore(async (deps) => {
      expect((await deps.store.list({ unresolved: true })).map((r) => r.request_id)).toEqual([REQUEST_A, 'mystery']);
      expect(await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).toMatchObject({ code: 'target_blocked', requestId: 'mystery' });
      await reconcile(deps, 'mystery', { reason: 'old run checked', actor: 'ops' });
      expect(await refusal(dispatch(deps, { minionId: MINION, profile: 'configure' }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_A });
      expect((await dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' })).outcome).toBe('published');
    });
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  }

  it('indexes a store written before any index (version 0), and a blocked target is still refused', async () => {
    await history();
    toVersion0();
    expect(await refusal(createFileRecordStore({ root: world.storeRoot }))).toMatchObject({ code: 'store_format', detail: 'needs_migration' });
    const report = await migrateFileRecordStore({ root: world.storeRoot });
    expect(report).toEqual({
      location: world.storeRoot,
      wasCurrent: false,
      records: 3,
      undecodable: 0,
      unresolved: 2,
      historyEntriesWritten: 3,
      unresolvedEntriesWritten: 2,
      staleEntriesRemoved: 0,
    });
    await checkMigrated();
  });

  it('adds the unresolved index and the marker to a store of the first indexed layout (version 1)', async () => {
    await history();
    toVersion1();
    expect(await refusal(createFileRecordStore({ root: world.storeRoot, create: false }))).toMatchObject({ code: 'store_format', detail: 'needs_migration' });
    const report = await migrateFileRecordStore({ root: world.storeRoot });
    expect(report).toMatchObject({ wasCurrent: false, records: 3, unresolved: 2, historyEntriesWritten: 0, unresolvedEntriesWritten: 2 });
    await checkMigrated();
  });

  it('is idempotent: a second run writes nothing and reports the store as current', async () => {
    await history();
    toVersion0();
    await migrateFileRecordStore({ root: world.storeRoot });
    const snapshot = (): string[] => ['targets', 'unresolved'].flatMap((d) => entries(d).flatMap((t) => entries(d, t).map((e) => `${d}/${t}/${e}`)));
    const before = snapshot();
    const again = await migrateFileRecordStore({ root: world.storeRoot });
    expect(again).toMatchObject({ wasCurrent: true, records: 3, unresolved: 2, historyEntriesWritten: 0, unresolvedEntriesWritten: 0, staleEntriesRemoved: 0 });
    expect(snapshot()).toEqual(before);
    await checkMigrated();
  });

  it('indexes a record restored from a backup whose only entry is a dangling one under another target', async () => {
    // REQUEST_A bound to OTHER_MINION and left blocking (publishing); keep its record as a "backup".
    world.standIn.publishMode = 'error_500';
    expect((await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('publishing');
    world.standIn.publishMode = 'ack';
    const backup = readFileSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`), 'utf8');
    rmSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`));
    rmSync(join(world.storeRoot, 'targets', OTHER_MINION), { recursive: true });
    rmSync(join(world.storeRoot, 'unresolved', OTHER_MINION), { recursive: true });
    // The same id dispatched to MINION crashes at S3: dangling entries under MINION.
    const crashing = await createFileRecordStore({
      root: world.storeRoot,
      crashAt: (point) => {
        if (point === 'S3') throw new Error('S3');
      },
    });
    await expect(dispatch({ ...world.deps, store: crashing }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).rejects.toThrow('S3');
    await crashing.close();
    plant(world, 'requests', `${REQUEST_A}.json`, backup);

    const report = await migrateFileRecordStore({ root: world.storeRoot });
    expect(report).toMatchObject({ records: 1, unresolved: 1, historyEntriesWritten: 1, unresolvedEntriesWritten: 1, staleEntriesRemoved: 1 });
    expect(entries('unresolved', MINION)).toEqual([]);
    await withStore(async (deps) => {
      expect(await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_A });
      expect(await deps.store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
    });
  });

  it('indexes a record it cannot decode so that it stops every dispatch until repaired', async () => {
    plant(world, 'requests', `${REQUEST_A}.json`, { protocol: 1, request_id: REQUEST_A, state: 'succeeded' });
    expect(await migrateFileRecordStore({ root: world.storeRoot })).toMatchObject({ records: 1, undecodable: 1, unresolved: 1 });
    expect(entries('unresolved', '_unbound')).toEqual([`${REQUEST_A}.json`]);
    await withStore(async (deps) => {
      expect((await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('store_corrupt');
    });
    // Repaired by hand into a settled record of MINION: the next run drops the entry.
    const settled = applyEvent(createRequestRecord({ request_id: REQUEST_A, minion_id: MINION, profile: 'configure', state_digest: '', jid: '20261129100000000009', at: '2026-11-29T10:00:00.000Z' }), { type: 'capability_failed', at: '2026-11-29T10:00:00.000Z', reason: 'capability_missing' });
    plant(world, 'requests', `${REQUEST_A}.json`, settled);
    expect(await migrateFileRecordStore({ root: world.storeRoot })).toMatchObject({ undecodable: 0, unresolved: 0, staleEntriesRemoved: 1 });
    await withStore(async (deps) => {
      expect((await dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' })).outcome).toBe('published');
    });
  });

  it('refuses a store that does not exist, and creates nothing', async () => {
    const missing = join(world.scratch, 'missing');
    expect(await refusal(migrateFileRecordStore({ root: missing }))).toMatchObject({ code: 'not_found', detail: 'no_store' });
    expect(existsSync(missing)).toBe(false);
    expect(await refusal(migrateFileRecordStore({ root: 'relative' }))).toMatchObject({ code: 'config_invalid' });
  });

  it('sweeps temporary files left by dead writers', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    for (const dir of ['requests', 'jids', join('targets', MINION), join('unresolved', MINION)]) {
      writeFileSync(join(world.storeRoot, dir, '.tmp-dead'), '{', { mode: 0o600 });
    }
    await migrateFileRecordStore({ root: world.storeRoot });
    for (const dir of ['requests', 'jids', join('targets', MINION), join('unresolved', MINION)]) {
      expect(readdirSync(join(world.storeRoot, dir))).not.toContain('.tmp-dead');
    }
  });
});
