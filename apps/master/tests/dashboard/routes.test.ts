import { createFileRecordStore } from '@oduflow/master-runner';
import { get } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY } from '../../src/serve/dashboard/assets.js';
import type { TokenRegistry } from '../../src/serve/tokens.js';
import { TOKENS, startServiceWorld, waitFor, type ServiceWorld } from '../serve/support/service-world.js';
import { FLEET, ROLLOUT_TARGETS, dashboardTokens, seedFleet, type Seeded } from './support/seed.js';

/*
 * The dashboard's HTTP side without a browser: the static front end and its
 * headers, the read models' authentication and tenancy, and /v1/events (a
 * real HTTP stream on the service's port): what it sends, to whom, and that
 * it never holds the service open when it stops.
 */

let world: ServiceWorld | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

async function seededWorld(tokens: () => TokenRegistry = () => dashboardTokens()): Promise<{ world: ServiceWorld; seeded: Seeded }> {
  let seeded: Seeded | undefined;
  const w = await startServiceWorld({ tokens, pollWalkEveryMs: 3_600_000 }, async (root) => {
    const store = await createFileRecordStore({ root, lockWaitMs: 10_000 });
    seeded = await seedFleet(store);
    return store;
  });
  world = w;
  if (seeded === undefined) throw new Error('not seeded');
  return { world: w, seeded };
}

interface Followed {
  readonly events: { event: string; data: unknown }[];
  readonly text: () => string;
  readonly ended: Promise<void>;
  stop(): void;
}

/** Follows /v1/events on its own connection (node:http, no pool), so stopping it closes exactly that connection. */
function follow(w: ServiceWorld, token: string, query = ''): Promise<Followed | number> {
  return new Promise((resolve, reject) => {
    const request = get(`${w.service.address}/v1/events${query}`, { headers: { authorization: `Bearer ${token}` }, agent: false }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        resolve(response.statusCode ?? 0);
        return;
      }
      expect(response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      const events: { event: string; data: unknown }[] = [];
      let raw = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        raw += chunk;
        let end = raw.indexOf('\n\n');
        while (end !== -1) {
          const block = raw.slice(0, end);
          raw = raw.slice(end + 2);
          end = raw.indexOf('\n\n');
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event !== undefined && data !== undefined) events.push({ event, data: JSON.parse(data) as unknown });
        }
      });
      const ended = new Promise<void>((done) => {
        response.on('close', () => done());
        response.on('error', () => done());
      });
      resolve({ events, text: () => JSON.stringify(events), ended, stop: () => request.destroy() });
    });
    request.on('error', reject);
  });
}

describe('the dashboard over HTTP', () => {
  it('serves its front end under /ui with the strict security headers, and the shell for every page', async () => {
    const { world: w } = await seededWorld();
    const shell = await w.call({ method: 'GET', url: '/ui/' });
    expect(shell.statusCode).toBe(200);
    expect(shell.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(shell.headers['content-security-policy']).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).not.toContain('unsafe');
    expect(shell.headers['x-frame-options']).toBe('DENY');
    expect(shell.headers['x-content-type-options']).toBe('nosniff');
    expect(shell.body).not.toMatch(/<script>|<style>|https?:\/\//);
    const script = /src="\/ui\/(assets\/[^"]+\.js)"/.exec(shell.body)?.[1];
    expect(script).toBeDefined();
    const js = await w.call({ method: 'GET', url: `/ui/${script ?? ''}` });
    expect(js.statusCode).toBe(200);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    const again = await w.call({ method: 'GET', url: `/ui/${script ?? ''}`, headers: { 'if-none-match': String(js.headers['etag']) } });
    expect(again.statusCode).toBe(304);
    expect((await w.call({ method: 'GET', url: `/ui/requests/${FLEET.unknown}` })).body).toBe(shell.body);
    expect((await w.call({ method: 'GET', url: '/ui/assets/gone-1234.js' })).statusCode).toBe(404);
    expect((await w.call({ method: 'GET', url: '/ui/api/nothing' })).headers['content-type']).toContain('application/problem+json');
    expect((await w.call({ method: 'GET', url: '/ui' })).headers['location']).toBe('/ui/');
  });

  it('answers its read models only to a token with the read scope, and only about the tenant’s own targets', async () => {
    const { world: w, seeded } = await seededWorld();
    expect((await w.call({ method: 'GET', url: '/ui/api/overview' })).statusCode).toBe(401);
    const acme = (await w.call({ method: 'GET', url: '/ui/api/overview', token: TOKENS.acmeRead })).json<{ total: number; blocked: { minion_id: string }[] }>();
    const globex = (await w.call({ method: 'GET', url: '/ui/api/overview', token: TOKENS.globexAll })).json<{ total: number; blocked: { minion_id: string }[] }>();
    expect(acme.total).toBe(8);
    expect(globex.total).toBe(1);
    expect(JSON.stringify(acme)).not.toContain(seeded.globexUnknown.request_id);
    expect((await w.call({ method: 'GET', url: `/ui/api/requests/${seeded.globexUnknown.request_id}`, token: TOKENS.acmeRead })).statusCode).toBe(404);
    const who = await w.call({ method: 'GET', url: '/ui/api/whoami', token: TOKENS.acmeReconcile });
    expect(who.json()).toEqual({ tenant: 'acme', actor: 'acme-oncall', token_id: 'acme-reconcile', scopes: ['read', 'reconcile'], rollouts: true });
    expect(who.body).not.toContain(TOKENS.acmeReconcile);
    expect(who.headers['cache-control']).toBe('no-store');
  });

  it('streams each committed change of the tenant’s requests to the tenant only, as it commits', async () => {
    const { world: w, seeded } = await seededWorld();
    expect(await follow(w, 'odf_unknown')).toBe(401);
    const acme = await follow(w, TOKENS.acmeRead);
    const globex = await follow(w, TOKENS.globexAll);
    if (typeof acme === 'number' || typeof globex === 'number') throw new Error('no stream');
    await waitFor(() => acme.events.some((e) => e.event === 'ready') && globex.events.some((e) => e.event === 'ready'), 10_000, 'both streams open');
    const reconcile = (id: string, token: string) =>
      w.call({ method: 'POST', url: `/v1/requests/${id}/reconcile`, token, headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ reason: 'checked the host' }) });
    expect((await reconcile(seeded.unknown.request_id, TOKENS.acmeReconcile)).statusCode).toBe(200);
    expect((await reconcile(seeded.globexUnknown.request_id, TOKENS.globexAll)).statusCode).toBe(200);
    await waitFor(() => acme.events.some((e) => e.event === 'request') && globex.events.some((e) => e.event === 'request'), 10_000, 'both changes heard');
    // The poller's first walk may also have polled the publishing request meanwhile: look at the reconciled one.
    const heard = (acme.events.filter((e) => e.event === 'request') as { data: { before: string; page: { record: { request_id: string; state: string } } } }[]).filter(
      (e) => e.data.page.record.request_id !== seeded.uncertain.request_id,
    );
    expect(heard.map((e) => [e.data.before, e.data.page.record.request_id, e.data.page.record.state])).toEqual([['unknown', seeded.unknown.request_id, 'reconciled']]);
    expect(acme.text()).not.toContain(seeded.globexUnknown.request_id);
    expect(globex.text()).not.toContain(seeded.unknown.request_id);
    expect(acme.text()).not.toContain(TOKENS.acmeRead);
    acme.stop();
    globex.stop();
  });

  it('ends a stream whose token was removed from the tokens file at its next event', async () => {
    const full = dashboardTokens();
    let current = full;
    const { world: w, seeded } = await seededWorld(() => current);
    const stream = await follow(w, TOKENS.acmeRead);
    if (typeof stream === 'number') throw new Error('no stream');
    await waitFor(() => stream.events.some((e) => e.event === 'ready'), 10_000, 'the stream open');
    current = {
      ...full,
      authenticate: (authorization) => (authorization === `Bearer ${TOKENS.acmeRead}` ? undefined : full.authenticate(authorization)),
      ownerOf: (id) => full.ownerOf(id),
      minionsOf: (tenant) => full.minionsOf(tenant),
    };
    const reconciled = await w.call({
      method: 'POST',
      url: `/v1/requests/${seeded.quarantined.request_id}/reconcile`,
      token: TOKENS.acmeReconcile,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ reason: 'checked the host' }),
    });
    expect(reconciled.statusCode).toBe(200);
    await stream.ended;
    expect(stream.text()).not.toContain(seeded.quarantined.request_id);
  });

  it('shows a rollout the tenant asked the service for, to that tenant only, and follows it live to its end', async () => {
    const { world: w } = await seededWorld();
    const posted = await w.call({
      method: 'POST',
      url: '/v1/rollouts',
      token: TOKENS.acmeAll,
      key: 'dash-rollout-1',
      payload: { profile: 'configure', targets: [...ROLLOUT_TARGETS], batch_size: 2, max_unresolved: 1 },
    });
    expect(posted.statusCode, posted.body).toBe(202);
    const id = posted.json<{ rollout_id: string }>().rollout_id;
    const stream = await follow(w, TOKENS.acmeRead, `?rollout=${id}`);
    if (typeof stream === 'number') throw new Error(`no stream: ${stream}`);
    const reports = (): { status: string; counts: Record<string, number> }[] =>
      stream.events.filter((e) => e.event === 'rollout').map((e) => (e.data as { report: { status: string; counts: Record<string, number> } }).report);
    await waitFor(() => reports().some((r) => r.status === 'succeeded'), 30_000, 'the rollout followed to its end');
    expect(reports().at(-1)?.counts['succeeded']).toBe(4);
    stream.stop();

    const listed = (await w.call({ method: 'GET', url: '/ui/api/rollouts', token: TOKENS.acmeRead })).json<{ items: { id: string; source: string; status: string }[] }>();
    expect(listed.items).toEqual([expect.objectContaining({ id, source: 'http', status: 'succeeded' })]);
    const page = await w.call({ method: 'GET', url: `/ui/api/rollouts/${id}`, token: TOKENS.acmeRead });
    expect(page.json()).toMatchObject({ rollout_id: id, source: 'http', status: 'succeeded' });
    expect((await w.call({ method: 'GET', url: `/ui/api/rollouts/${id}`, token: TOKENS.globexAll })).statusCode).toBe(404);
    expect((await w.call({ method: 'GET', url: '/ui/api/rollouts', token: TOKENS.globexAll })).json()).toEqual({ items: [], unreadable: 0 });
    expect(await follow(w, TOKENS.globexAll, `?rollout=${id}`)).toBe(404);
  });

  it('does not let an open stream hold the service when it stops, and refuses a rollout it cannot show', async () => {
    const { world: w } = await seededWorld();
    expect(await follow(w, TOKENS.acmeRead, '?rollout=6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f')).toBe(404);
    expect(await follow(w, TOKENS.acmeRead, '?rollout=not-a-run')).toBe(400);
    const stream = await follow(w, TOKENS.acmeRead);
    if (typeof stream === 'number') throw new Error('no stream');
    await waitFor(() => stream.events.some((e) => e.event === 'ready'), 10_000, 'the stream open');
    const started = Date.now();
    await w.service.stop();
    await stream.ended;
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
