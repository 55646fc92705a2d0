import { isBlocking, isMinionId } from '@oduflow/protocol';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { principalOf } from './auth.js';
import type { ServiceContext } from './context.js';
import { ProblemError, problemResponses } from './problems.js';
import { TargetParamsSchema, TargetViewSchema } from './schemas.js';

/*
 * GET /v1/targets/{minion_id}: whether a new request to this target would be
 * refused, and by which requests. Read without the target lock (an answer is
 * a snapshot either way). A target of another tenant is 404.
 */

export function registerTargetRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/targets/:minion_id',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'getTarget',
        summary: 'Whether a target is blocked, and by which requests',
        tags: ['targets'],
        security: [{ bearer: [] }],
        params: TargetParamsSchema,
        response: { 200: TargetViewSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'not_found') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const minionId = request.params.minion_id;
      if (!isMinionId(minionId)) throw new ProblemError('invalid_request', 'not a minion id (client-<uuid>)');
      if (ctx.tokens().ownerOf(minionId) !== principal.tenant) throw new ProblemError('not_found', 'no such target');
      const own = await ctx.deps.store.list({ minionId, unresolved: true });
      // A legacy record that names no target blocks every target; the tenant is told, not shown which.
      const unbound = [];
      for (const id of ctx.unboundLegacy) {
        const record = await ctx.deps.store.get(id);
        if (record !== undefined && isBlocking(record)) unbound.push({ request_id: null, state: record.state });
      }
      const blockers = [...own.map((r) => ({ request_id: r.request_id, state: r.state })), ...unbound];
      return { minion_id: minionId, blocked: blockers.length > 0, blockers };
    },
  );
}
