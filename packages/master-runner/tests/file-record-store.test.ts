import { createRequestRecord } from '@oduflow/protocol';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dispatch } from '../src/dispatch.js';
import { createFileRecordStore } from '../src/file-record-store.js';
import { preflight } from '../src/preflight.js';
import { reconcile } from '../src/reconcile.js';
import type { MasterDeps } from '../src/deps.js';
import type { RecordStore } from '../src/record-store.js';
import { MINION, OTHER_MINION, REQUEST_A, REQUEST_B, makeWorld, scratchDir, type World, refusal } from './support/harness.js';

function plant(world: World, dir: 'requests' | 'jids', name: string, value: unknown): void {
  const path = join(world.storeRoot, dir, name);
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
      expect(readdirSync(world.storeRoot).sort()).toEqual(['jids', 'locks', 'requests', 'targets', 'unbound']);
      expect(readdirSync(join(world.storeRoot, 'targets', MINION))).toEqual([`${REQUEST_A}.json`]);
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

  /** Deps on the store opened again: records planted at rest are found (and indexed) when a store is opened. */
  async function reopen(): Promise<MasterDeps> {
    const store = await createFileRecordStore({ root: world.storeRoot, lockWaitMs: 10_000 });
    opened.push(store);
    return { ...world.deps, store };
  }

  it('stops with store_corrupt on a damaged protocol 1 record instead of misreading it', async () => {
    plant(world, 'requests', `${REQUEST_A}.json`, { protocol: 1, request_id: REQUEST_A, state: 'succeeded' });
    const deps = await reopen();
    expect((await refusal(deps.store.get(REQUEST_A))).code).toBe('store_corrupt');
    // Its target cannot be read: indexed as unbound, it stops every dispatch (fail closed).
    expect(readdirSync(join(world.storeRoot, 'unbound'))).toEqual([`${REQUEST_A}.json`]);
    expect((await refusal(dispatch(deps, { minionId: MINION, profile: 'configure' }))).code).toBe('store_corrupt');
    expect((await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('store_corrupt');
    expect(world.standIn.publications).toHaveLength(0);
  });

  it('stops with store_corrupt on a record that is not JSON', async () => {
    plant(world, 'requests', `${REQUEST_A}.json`, '{"protocol":1,');
    expect((await refusal(world.store.get(REQUEST_A))).code).toBe('store_corrupt');
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
    expect((await preflight(deps)).clean).toBe(true);
    expect((await dispatch(deps, { minionId: MINION, profile: 'configure' })).outcome).toBe('published');
  });

  it('lets a legacy record that names no target block every target (fail closed)', async () => {
    plant(world, 'requests', 'mystery.json', { protocol: 0, status: 'sent' });
    const deps = await reopen();
    expect(readdirSync(join(world.storeRoot, 'unbound'))).toEqual(['mystery.json']);
    expect((await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('target_blocked');
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

describe('the target index', () => {
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

  /** Turns the store into the layout written before the target index: records and JIDs only. */
  function toOldLayout(): void {
    rmSync(join(world.storeRoot, 'targets'), { recursive: true });
    rmSync(join(world.storeRoot, 'unbound'), { recursive: true });
  }

  const targetEntries = (minion: string): string[] => readdirSync(join(world.storeRoot, 'targets', minion)).sort();

  it('indexes a store written in the old layout when it is opened, and a blocked target is still refused', async () => {
    world.standIn.publishMode = 'error_500';
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('publishing');
    world.standIn.publishMode = 'ack';
    expect((await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B })).outcome).toBe('published');
    await reconcile(world.deps, REQUEST_B, { reason: 'checked on the host', actor: 'ops' });
    plant(world, 'requests', 'mystery.json', { protocol: 0, status: 'sent' });
    toOldLayout();

    const deps = await reopen();
    expect(targetEntries(MINION)).toEqual([`${REQUEST_A}.json`]);
    expect(targetEntries(OTHER_MINION)).toEqual([`${REQUEST_B}.json`]);
    expect(readdirSync(join(world.storeRoot, 'unbound'))).toEqual(['mystery.json']);
    const blocked = await refusal(dispatch(deps, { minionId: MINION, profile: 'configure' }));
    expect(blocked).toMatchObject({ code: 'target_blocked' });
    await reconcile(deps, 'mystery', { reason: 'old run checked', actor: 'ops' });
    expect(await refusal(dispatch(deps, { minionId: MINION, profile: 'configure' }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_A });
    expect((await dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' })).outcome).toBe('published');
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('finishes an indexing interrupted half-way and is idempotent', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B });
    // A crash after indexing one of the two records: OTHER_MINION's entry is gone.
    rmSync(join(world.storeRoot, 'targets', OTHER_MINION), { recursive: true });
    const deps = await reopen();
    expect(targetEntries(OTHER_MINION)).toEqual([`${REQUEST_B}.json`]);
    expect(await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_B });
    const before = readFileSync(join(world.storeRoot, 'targets', MINION, `${REQUEST_A}.json`), 'utf8');
    await reopen();
    await reopen();
    expect(targetEntries(MINION)).toEqual([`${REQUEST_A}.json`]);
    expect(readFileSync(join(world.storeRoot, 'targets', MINION, `${REQUEST_A}.json`), 'utf8')).toBe(before);
  });

  it('decides a target from its own records only (a damaged record of another target is not read)', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B });
    world.standIn.publishMode = 'ack';
    // Damage OTHER_MINION's record after it was indexed there.
    plant(world, 'requests', `${REQUEST_B}.json`, { protocol: 1, request_id: REQUEST_B, state: 'succeeded' });
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure' })).outcome).toBe('published');
    expect((await refusal(dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure' }))).code).toBe('store_corrupt');
  });

  it('S2 (index written, record not): the target is not blocked, the JID stays burned, the request can be dispatched again', async () => {
    const interrupted = new Error('S2');
    const crashing = await reopen({
      crashAt: (point) => {
        if (point === 'S2') throw interrupted;
      },
    });
    const frozen = () => new Date('2026-11-29T10:00:00.000Z');
    await expect(dispatch({ ...crashing, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).rejects.toBe(interrupted);
    expect(existsSync(join(world.storeRoot, 'jids', '20261129100000000000.json'))).toBe(true);
    expect(targetEntries(MINION)).toEqual([`${REQUEST_A}.json`]);
    expect(existsSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`))).toBe(false);
    expect(world.standIn.publications).toHaveLength(0);

    const deps = await reopen();
    expect(await deps.store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
    const again = await dispatch({ ...deps, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(again.record).toMatchObject({ state: 'published', jid: '20261129100000000001' });
    expect(await refusal(dispatch(deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_B }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_A });
    expect(world.standIn.publicationsUnder('20261129100000000000')).toBe(0);
  });

  it('re-indexes a record whose only entry is a dangling one under another target (S2 crash, then a restored record)', async () => {
    // REQUEST_A bound to OTHER_MINION and left blocking (publishing); keep its record as a "backup".
    world.standIn.publishMode = 'error_500';
    expect((await dispatch(world.deps, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('publishing');
    world.standIn.publishMode = 'ack';
    const backup = readFileSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`), 'utf8');
    rmSync(join(world.storeRoot, 'requests', `${REQUEST_A}.json`));
    rmSync(join(world.storeRoot, 'targets', OTHER_MINION), { recursive: true });
    // The same id dispatched to MINION crashes at S2: a dangling entry targets/MINION/REQUEST_A.
    const crashing = await reopen({
      crashAt: (point) => {
        if (point === 'S2') throw new Error('S2');
      },
    });
    await expect(dispatch(crashing, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).rejects.toThrow('S2');
    expect(targetEntries(MINION)).toEqual([`${REQUEST_A}.json`]);
    // The record bound to OTHER_MINION is restored.
    plant(world, 'requests', `${REQUEST_A}.json`, backup);

    const deps = await reopen();
    expect(targetEntries(OTHER_MINION)).toEqual([`${REQUEST_A}.json`]);
    expect(await refusal(dispatch(deps, { minionId: OTHER_MINION, profile: 'configure' }))).toMatchObject({ code: 'target_blocked', requestId: REQUEST_A });
    expect(await deps.store.withTarget(MINION, (u) => u.blockers())).toEqual([]);
  });

  it('creates no lock file named from a request id without a record or from an invalid minion id', async () => {
    const deps = await reopen();
    expect(await refusal(deps.store.updateRequest('bad', (r) => r))).toMatchObject({ code: 'not_found' });
    expect(await refusal(reconcile(deps, REQUEST_A, { reason: 'x', actor: 'ops' }))).toMatchObject({ code: 'not_found' });
    expect(await refusal(deps.store.withTarget('../escape', async () => undefined))).toMatchObject({ code: 'invalid_input' });
    expect(readdirSync(join(world.storeRoot, 'locks')).filter((n) => n.startsWith('request-') || n.includes('escape'))).toEqual([]);
  });

  it('S1 (JID reserved, index not): nothing blocks and the JID stays burned', async () => {
    const interrupted = new Error('S1');
    const crashing = await reopen({
      crashAt: (point) => {
        if (point === 'S1') throw interrupted;
      },
    });
    const frozen = () => new Date('2026-11-29T10:00:00.000Z');
    await expect(dispatch({ ...crashing, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).rejects.toBe(interrupted);
    expect(existsSync(join(world.storeRoot, 'targets', MINION))).toBe(false);
    const deps = await reopen();
    const again = await dispatch({ ...deps, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_B });
    expect(again.record).toMatchObject({ state: 'published', jid: '20261129100000000001' });
  });
});
