import { canonicalJson, type ProtocolRequestRecord } from '@oduflow/protocol';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dispatch } from '../src/dispatch.js';
import { poll } from '../src/poll.js';
import { publishPending } from '../src/publish-pending.js';
import { reconcile } from '../src/reconcile.js';
import type { RecordStore } from '../src/record-store.js';
import { createSaltApiClient } from '../src/salt-api-client.js';
import { GOOD_CAPABILITIES, OLD_CAPABILITIES, refusedUrl } from './support/salt-api-standin.js';
import { MINION, OTHER_MINION, REQUEST_A, REQUEST_B, makeWorld, type World, refusal, wrapStore } from './support/harness.js';

let world: World;
beforeEach(async () => {
  world = await makeWorld();
});
afterEach(async () => {
  await world.close();
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('dispatch', () => {
  it('records the request, publishes it once under its JID and records the acknowledgement', async () => {
    const result = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(result.outcome).toBe('published');
    const record = result.record as ProtocolRequestRecord;
    expect(record).toMatchObject({ state: 'published', publish_attempts: 1, role: 'roles.client_stack' });
    expect(record.jid).toMatch(/^20261129100000\d{6}$/);
    expect(world.standIn.publications).toEqual([
      { minionId: MINION, jid: record.jid, fun: 'oduflow_job.run', args: [REQUEST_A, 'configure', ''] },
    ]);
    expect(await world.store.get(REQUEST_A)).toEqual(record);
  });

  it('publishes custom high data and stores only its digest', async () => {
    const text = canonicalJson({ motd: { 'file.managed': [{ name: '/etc/motd' }, { contents: 'secret-looking-text' }] } });
    const result = await dispatch(world.deps, { minionId: MINION, profile: 'custom', stateDataJson: text, requestId: REQUEST_A });
    expect(result.outcome).toBe('published');
    expect(world.standIn.publications[0]?.args[2]).toBe(text);
    const stored = JSON.stringify(await world.store.get(REQUEST_A));
    expect(stored).not.toContain('secret-looking-text');
    expect((result.record as ProtocolRequestRecord).state_digest).toMatch(/^[0-9a-f]{64}$/);
  });

  it('chooses the next free JID when the clock gives one that is taken', async () => {
    const frozen = () => new Date('2026-11-29T10:00:00.000Z');
    await dispatch({ ...world.deps, now: frozen }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const second = await dispatch({ ...world.deps, now: frozen }, { minionId: OTHER_MINION, profile: 'configure', requestId: REQUEST_B });
    expect((second.record as ProtocolRequestRecord).jid).toBe('20261129100000000001');
  });

  it('refuses a second dispatch to a target with an unresolved request, publishing nothing', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const error = await refusal(dispatch(world.deps, { minionId: MINION, profile: 'production', requestId: REQUEST_B }));
    expect(error.code).toBe('target_blocked');
    expect(error.requestId).toBe(REQUEST_A);
    expect(world.standIn.publications).toHaveLength(1);
    expect(await world.store.get(REQUEST_B)).toBeUndefined();
  });

  it('allows the next dispatch once the first request has a terminal receipt', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect((await poll(world.deps, REQUEST_A)).record.state).toBe('succeeded');
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'production', requestId: REQUEST_B })).outcome).toBe('published');
  });

  it('returns the existing record when the same request is dispatched again, publishing nothing', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const again = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(again.outcome).toBe('existing');
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('refuses a request id reused for another profile', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect((await refusal(dispatch(world.deps, { minionId: MINION, profile: 'production', requestId: REQUEST_A }))).code).toBe(
      'request_conflict',
    );
  });

  it.each([
    ['a minion without the module', { retcode: 1, ret: "'oduflow_job.capabilities' is not available." }, { code: 'capability_missing' }],
    ["module 1.0.0's three-key answer", { retcode: 0, ret: OLD_CAPABILITIES }, { code: 'capability_unsupported' }],
    ['an older protocol', { retcode: 0, ret: { protocol: 0, module_version: '0.9.0', salt_version: '3006.27' } }, { code: 'capability_unsupported' }],
    ['a malformed answer', { retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: 1 } }, { code: 'capability_unsupported' }],
    ['another Salt version', { retcode: 0, ret: { ...GOOD_CAPABILITIES, salt_version: '3006.9' } }, { code: 'not_ready', readiness: ['salt_version'] }],
    [
      'a minion that is not ready',
      { retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['multiprocessing', 'cache_jobs'] } },
      { code: 'not_ready', readiness: ['multiprocessing', 'cache_jobs'] },
    ],
  ])('rejects the request when the minion answers with %s, publishing nothing and not blocking', async (_label, reply, reason) => {
    world.standIn.capabilities = () => reply;
    const result = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(result).toMatchObject({ outcome: 'rejected', rejection: reason });
    expect(result.record).toMatchObject({ state: 'rejected', reason });
    expect(await world.store.get(REQUEST_A)).toMatchObject({ state: 'rejected', reason });
    expect(world.standIn.publications).toHaveLength(0);
    world.standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_B })).outcome).toBe('published');
  });

  it.each([
    ['no return', { noReturn: true as const }, 'minion_unreachable', 'no_return'],
    ['a salt-api failure', { httpStatus: 500 }, 'minion_unreachable', 'server_error'],
    ['a body that is not salt-api JSON', { body: 'not json' }, 'minion_unreachable', 'malformed_response'],
    ['no accepted key', { noTarget: true as const }, 'no_target', undefined],
  ])('records nothing when the capability call gets %s, and the same request id goes through later', async (_label, reply, code, detail) => {
    world.standIn.capabilities = () => reply;
    const error = await refusal(dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A }));
    expect(error).toMatchObject({ code, detail, requestId: REQUEST_A });
    expect(await world.store.get(REQUEST_A)).toBeUndefined();
    expect(readdirSync(join(world.storeRoot, 'jids'))).toEqual([]);
    expect(world.standIn.publications).toHaveLength(0);

    world.standIn.capabilities = () => ({ retcode: 0, ret: GOOD_CAPABILITIES });
    const again = await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(again).toMatchObject({ outcome: 'published', record: { request_id: REQUEST_A, state: 'published' } });
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('records nothing when salt-api refuses the connection of the capability call', async () => {
    const refused = createSaltApiClient({ url: await refusedUrl(), username: 'u', passwordFile: world.passwordFile, timeoutMs: 1_000 });
    const error = await refusal(dispatch({ ...world.deps, salt: refused }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A }));
    expect(error).toMatchObject({ code: 'minion_unreachable', detail: 'connection_refused' });
    expect(await world.store.get(REQUEST_A)).toBeUndefined();
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).outcome).toBe('published');
  });

  it('names publish-pending when the target is blocked by a prepared request', async () => {
    const refused = createSaltApiClient({ url: await refusedUrl(), username: 'u', passwordFile: world.passwordFile, timeoutMs: 1_000 });
    const salt = { call: world.salt.call.bind(world.salt), publish: refused.publish.bind(refused) };
    expect((await dispatch({ ...world.deps, salt }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A })).record.state).toBe('prepared');
    const error = await refusal(dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_B }));
    expect(error).toMatchObject({ code: 'target_blocked', detail: 'prepared', requestId: REQUEST_A });
    expect(error.message).toContain('publish-pending');
  });

  it.each([
    ['a lost acknowledgement', 'lost_ack' as const],
    ['a publication timeout', 'hang' as const],
    ['a 500 answer', 'error_500' as const],
  ])('leaves %s published-uncertain: polled, never published again', async (_label, mode) => {
    const uncertain = await makeWorld({ publishTimeoutMs: 300 });
    try {
      uncertain.standIn.publishMode = mode;
      const result = await dispatch(uncertain.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
      expect(result.outcome).toBe('publish_uncertain');
      expect(result.record.state).toBe('publishing');
      uncertain.standIn.publishMode = 'ack';
      expect(await publishPending(uncertain.deps)).toEqual([]);
      const polled = await poll(uncertain.deps, REQUEST_A);
      expect(polled.record).toMatchObject({ state: 'succeeded', passed: 60, total: 60 });
      expect(uncertain.standIn.publicationsOf(REQUEST_A)).toBe(1);
    } finally {
      await uncertain.close();
    }
  });

  it('returns a refused publication to prepared and publishes it later once, with the same JID', async () => {
    const refused = createSaltApiClient({ url: await refusedUrl(), username: 'u', passwordFile: world.passwordFile, timeoutMs: 1_000 });
    // Capability goes through the live stand-in; only the publication meets the refused port.
    const salt = { call: world.salt.call.bind(world.salt), publish: refused.publish.bind(refused) };
    const first = await dispatch({ ...world.deps, salt }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(first.outcome).toBe('not_sent');
    expect(first.record).toMatchObject({ state: 'prepared', publish_attempts: 1 });
    const jid = (first.record as ProtocolRequestRecord).jid;
    expect(world.standIn.publications).toHaveLength(0);

    const pending = await publishPending(world.deps);
    expect(pending.map((p) => p.outcome)).toEqual(['published']);
    expect(pending[0]?.record).toMatchObject({ state: 'published', jid, publish_attempts: 2 });
    expect(await publishPending(world.deps)).toEqual([]);
    expect(world.standIn.publicationsUnder(jid)).toBe(1);
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('publishes a pending request once when two workers publish pending requests at the same time', async () => {
    const refused = createSaltApiClient({ url: await refusedUrl(), username: 'u', passwordFile: world.passwordFile, timeoutMs: 1_000 });
    const salt = { call: world.salt.call.bind(world.salt), publish: refused.publish.bind(refused) };
    await dispatch({ ...world.deps, salt }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const [a, b] = await Promise.all([publishPending(world.deps), publishPending(world.deps)]);
    const outcomes = [...a, ...b].map((r) => r.outcome);
    expect(outcomes.filter((o) => o === 'published')).toHaveLength(1);
    expect(outcomes.filter((o) => o !== 'published' && o !== 'skipped')).toEqual([]);
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('publishes a pending custom request only with state data of the recorded digest', async () => {
    const text = canonicalJson({ motd: { 'file.managed': [{ name: '/etc/motd' }] } });
    const refused = createSaltApiClient({ url: await refusedUrl(), username: 'u', passwordFile: world.passwordFile, timeoutMs: 1_000 });
    const salt = { call: world.salt.call.bind(world.salt), publish: refused.publish.bind(refused) };
    await dispatch({ ...world.deps, salt }, { minionId: MINION, profile: 'custom', stateDataJson: text, requestId: REQUEST_A });
    expect((await publishPending(world.deps)).map((p) => [p.outcome, p.outcome === 'skipped' ? p.skip : null])).toEqual([['skipped', 'state_data_required']]);
    const other = canonicalJson({ motd: { 'file.absent': [{ name: '/etc/motd' }] } });
    expect((await refusal(publishPending(world.deps, { requestId: REQUEST_A, stateDataJson: other }))).detail).toBe('binding_conflict');
    const done = await publishPending(world.deps, { requestId: REQUEST_A, stateDataJson: text });
    expect(done.map((p) => p.outcome)).toEqual(['published']);
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it.each([
    ['not ready', { retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['store_unsafe'] } }, 'not_ready'],
    ['without the module', { retcode: 1, ret: "'oduflow_job.capabilities' is not available." }, 'capability_missing'],
    ['unreachable', { noReturn: true as const }, 'unreachable'],
    ['without an accepted key', { noTarget: true as const }, 'no_target'],
  ])('leaves a pending request prepared when its minion is %s, saying why', async (_label, reply, skip) => {
    const refused = createSaltApiClient({ url: await refusedUrl(), username: 'u', passwordFile: world.passwordFile, timeoutMs: 1_000 });
    const salt = { call: world.salt.call.bind(world.salt), publish: refused.publish.bind(refused) };
    await dispatch({ ...world.deps, salt }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    world.standIn.capabilities = () => reply;
    expect(await publishPending(world.deps)).toMatchObject([{ outcome: 'skipped', skip, record: { state: 'prepared' } }]);
    expect(world.standIn.publications).toHaveLength(0);
  });

  it('refuses to publish a request that is already publishing', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect((await refusal(publishPending(world.deps, { requestId: REQUEST_A }))).code).toBe('illegal_transition');
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('gives the second of two concurrent dispatches of one request the existing record, publishing once', async () => {
    const input = { minionId: MINION, profile: 'configure', requestId: REQUEST_A };
    const results = await Promise.all([dispatch(world.deps, input), dispatch(world.deps, input)]);
    expect(results.map((r) => r.outcome).sort()).toEqual(['existing', 'published']);
    expect(results.every((r) => r.record.request_id === REQUEST_A)).toBe(true);
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
  });

  it('publishes nothing and throws nothing when publish-pending took the prepared record first', async () => {
    world.standIn.publishMode = 'hold';
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let arrived!: () => void;
    const atIntent = new Promise<void>((resolve) => (arrived = resolve));
    const store = world.store;
    // Holds the dispatch between persisting its prepared record and recording its intent.
    const gated: RecordStore = wrapStore(store, {
      updateRequest: async (id, decide, change) => {
        arrived();
        await gate;
        return store.updateRequest(id, decide, change);
      },
    });
    const dispatching = dispatch({ ...world.deps, store: gated }, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    await atIntent;
    expect((await world.store.get(REQUEST_A))?.state).toBe('prepared');
    const pending = publishPending(world.deps, { requestId: REQUEST_A });
    await until(() => world.standIn.publications.length === 1); // publish-pending's publication, held open
    open();
    const result = await dispatching;
    expect(result).toMatchObject({ outcome: 'already_publishing', record: { state: 'publishing', request_id: REQUEST_A } });
    world.standIn.releaseHeld();
    expect((await pending).map((p) => p.outcome)).toEqual(['published']);
    expect(world.standIn.publicationRequests).toBe(1);
    expect(world.standIn.publicationsOf(REQUEST_A)).toBe(1);
    expect((await world.store.get(REQUEST_A))?.state).toBe('published');
  });

  it('leaves a publication met by an expired session published-uncertain: one request sent, never re-published', async () => {
    // The session salt-api rejects is only discovered by sending the publication.
    const deps = { ...world.deps, crashAt: (point: string) => (point === 'P2' ? world.standIn.dropTokens() : undefined) };
    const result = await dispatch(deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(result).toMatchObject({
      outcome: 'publish_uncertain',
      failure: 'unauthorized',
      record: { state: 'publishing', reason: { code: 'publish_uncertain', failure: 'unauthorized' } },
    });
    expect(world.standIn.publicationRequests).toBe(1);
    expect(await publishPending(world.deps)).toEqual([]);
    expect(world.standIn.publicationRequests).toBe(1);
    const polled = await poll(world.deps, REQUEST_A);
    expect(polled).toMatchObject({ observed: { status: 'not_started' }, record: { state: 'publishing' } });
  });

  it('leaves the request prepared when the login before its publication meets a refused connection', async () => {
    let clock = Date.now();
    const salt = createSaltApiClient({ url: world.standIn.url, username: world.standIn.username, passwordFile: world.passwordFile, eauth: 'sharedsecret', timeoutMs: 1_000, now: () => clock });
    const deps = {
      ...world.deps,
      salt,
      crashAt: (point: string) => {
        if (point !== 'P2') return;
        clock += 13 * 3600_000; // the token from the capability call has expired
        void world.standIn.close(); // and salt-api is gone
      },
    };
    const result = await dispatch(deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect(result).toMatchObject({
      outcome: 'not_sent',
      failure: 'connection_refused',
      record: { state: 'prepared', reason: { code: 'publish_not_sent', failure: 'connection_refused' } },
    });
    expect(world.standIn.logins).toBe(1);
    expect(world.standIn.publicationRequests).toBe(0);
    expect(world.standIn.publications).toHaveLength(0);
  });

  it('refuses bad input before touching the store or Salt', async () => {
    for (const input of [
      { minionId: 'client-NOPE', profile: 'configure' },
      { minionId: MINION, profile: 'everything' },
      { minionId: MINION, profile: 'configure', requestId: '00000000-0000-0000-0000-000000000000' },
      { minionId: MINION, profile: 'custom', stateDataJson: '{"a":{"b":[{"parallel":true}]}}' },
    ]) {
      expect((await refusal(dispatch(world.deps, input))).code).toBe('invalid_input');
    }
    expect(world.standIn.calls).toHaveLength(0);
    expect(readdirSync(join(world.storeRoot, 'requests'))).toEqual([]);
    expect(readdirSync(join(world.storeRoot, 'jids'))).toEqual([]);
  });
});

describe('reconcile', () => {
  it('unblocks a target without publishing anything', async () => {
    world.standIn.publishMode = 'error_500';
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    const before = world.standIn.calls.length;
    const record = await reconcile(world.deps, REQUEST_A, { reason: 'verified by hand on the host', actor: 'alice' });
    expect(record).toMatchObject({ state: 'reconciled', reconciliation: { reason: 'verified by hand on the host', actor: 'alice' } });
    expect(world.standIn.calls).toHaveLength(before);
    world.standIn.publishMode = 'ack';
    expect((await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_B })).outcome).toBe('published');
  });

  it('refuses to reconcile a terminal result or without a reason', async () => {
    await dispatch(world.deps, { minionId: MINION, profile: 'configure', requestId: REQUEST_A });
    expect((await refusal(reconcile(world.deps, REQUEST_A, { reason: '   ', actor: 'alice' }))).code).toBe('invalid_input');
    expect((await refusal(reconcile(world.deps, REQUEST_A, { reason: 'line\nbreak', actor: 'alice' }))).code).toBe('invalid_input');
    await poll(world.deps, REQUEST_A);
    expect((await refusal(reconcile(world.deps, REQUEST_A, { reason: 'x', actor: 'alice' }))).code).toBe('illegal_transition');
    expect((await refusal(reconcile(world.deps, REQUEST_B, { reason: 'x', actor: 'alice' }))).code).toBe('not_found');
  });
});
