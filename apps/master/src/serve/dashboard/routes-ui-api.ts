import { isRecordId } from '@oduflow/master-runner';
import { isJid, isMinionId, isRequestId, type RequestRecord } from '@oduflow/protocol';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth.js';
import type { ServiceContext } from '../context.js';
import { ProblemError } from '../problems.js';
import type { Principal } from '../tokens.js';
import { computeOverview } from './overview.js';
import { requestPage, targetPage } from './read-models.js';
import { findRollout, listVisibleRollouts } from './rollout-views.js';

/*
 * The dashboard's read models under /ui/api: authenticated exactly like the
 * API (a bearer token, the `read` scope, a tenant sees only its own targets
 * and their requests; anything else is 404 as if it did not exist). They
 * are shaped for the pages and may change with the dashboard, so they are
 * left out of /openapi.json; everything they show the API shows too.
 */

const hidden = { hide: true } as const;

function ownedBy(ctx: ServiceContext, principal: Principal, record: RequestRecord | undefined): record is RequestRecord {
  return record !== undefined && record.minion_id !== null && ctx.tokens().ownerOf(record.minion_id) === principal.tenant;
}

async function blockedEverywhere(ctx: ServiceContext): Promise<boolean> {
  for (const id of ctx.unboundLegacy) {
    const record = await ctx.deps.store.get(id);
    if (record !== undefined && record.state === 'legacy') return true;
  }
  return false;
}

export function registerUiApiRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const now = (): Date => ctx.deps.now?.() ?? new Date();
  const workspace = ctx.dashboard.rolloutWorkspace;
  const feed = ctx.dashboard.feed;

  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.url.startsWith('/ui/api/')) reply.header('cache-control', 'no-store');
    done(null, payload);
  });

  r.get('/ui/api/whoami', { config: { scope: 'read' }, schema: hidden }, (request) => {
    const p = principalOf(request);
    // Who the token is: never the token itself.
    return { tenant: p.tenant, actor: p.actor, token_id: p.tokenId, scopes: [...p.scopes].sort(), rollouts: ctx.rollouts.enabled || workspace !== undefined };
  });

  r.get('/ui/api/overview', { config: { scope: 'read' }, schema: hidden }, async (request) => {
    const p = principalOf(request);
    // Changes announced before seq_from are in the counts; those up to seq_to may or may not be (the walk is not a snapshot).
    const seqFrom = feed.seq;
    const overview = await computeOverview(ctx.deps.store, ctx.tokens().minionsOf(p.tenant), ctx.unboundLegacy, now());
    return { ...overview, seq_from: seqFrom, seq_to: feed.seq };
  });

  r.get(
    '/ui/api/search',
    { config: { scope: 'read' }, schema: { ...hidden, querystring: z.strictObject({ q: z.string().max(255) }) } },
    async (request) => {
      const p = principalOf(request);
      const q = request.query.q.trim().toLowerCase();
      if (isMinionId(q)) {
        return ctx.tokens().ownerOf(q) === p.tenant ? { match: 'target', minion_id: q } : { match: 'none', kind: 'minion_id' };
      }
      if (isJid(q)) {
        const record = await ctx.deps.store.getByJid(q);
        return ownedBy(ctx, p, record) ? { match: 'request', request_id: record.request_id } : { match: 'none', kind: 'jid' };
      }
      if (isRequestId(q)) {
        const record = await ctx.deps.store.get(q);
        return ownedBy(ctx, p, record) ? { match: 'request', request_id: record.request_id } : { match: 'none', kind: 'request_id' };
      }
      return { match: 'none', kind: 'unrecognized' };
    },
  );

  r.get(
    '/ui/api/requests/:id',
    { config: { scope: 'read' }, schema: { ...hidden, params: z.strictObject({ id: z.string().max(255) }) } },
    async (request) => {
      const p = principalOf(request);
      if (!isRecordId(request.params.id)) throw new ProblemError('invalid_request', 'not a request id');
      const seq = feed.seq;
      const record = await ctx.deps.store.get(request.params.id);
      if (!ownedBy(ctx, p, record)) throw new ProblemError('not_found', 'no such request');
      return { ...requestPage(record, await ctx.deps.store.history(record.request_id)), seq };
    },
  );

  r.get(
    '/ui/api/targets/:minion_id',
    { config: { scope: 'read' }, schema: { ...hidden, params: z.strictObject({ minion_id: z.string().max(255) }) } },
    async (request) => {
      const p = principalOf(request);
      const minionId = request.params.minion_id;
      if (!isMinionId(minionId)) throw new ProblemError('invalid_request', 'not a minion id (client-<uuid>)');
      if (ctx.tokens().ownerOf(minionId) !== p.tenant) throw new ProblemError('not_found', 'no such target');
      const seq = feed.seq;
      return { seq, ...targetPage(minionId, await ctx.deps.store.list({ minionId }), await blockedEverywhere(ctx)) };
    },
  );

  r.get('/ui/api/rollouts', { config: { scope: 'read' }, schema: hidden }, async (request) => {
    const p = principalOf(request);
    return listVisibleRollouts(ctx.rollouts, workspace, p.tenant, (id) => ctx.tokens().ownerOf(id));
  });

  r.get(
    '/ui/api/rollouts/:id',
    { config: { scope: 'read' }, schema: { ...hidden, params: z.strictObject({ id: z.string().max(64) }) } },
    async (request) => {
      const p = principalOf(request);
      const id = request.params.id;
      if (!isRequestId(id)) throw new ProblemError('invalid_request', 'not a rollout id');
      const found = await findRollout(ctx.rollouts, workspace, p.tenant, id, (minionId) => ctx.tokens().ownerOf(minionId));
      if (found === undefined) throw new ProblemError('not_found', 'no such rollout');
      return { ...found.report, source: found.source };
    },
  );
}
