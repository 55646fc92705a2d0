import { isRequestId } from '@oduflow/protocol';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { principalOf, requireScope } from './auth.js';
import type { ServiceContext } from './context.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { IdempotencyKeyHeadersSchema, keyProblemDetail, parseIdempotencyKey } from './idempotency-key.js';
import { ProblemError, problemResponses } from './problems.js';
import {
  CreateRolloutBodySchema,
  ROLLOUT_BODY_LIMIT_BYTES,
  RolloutIdParamsSchema,
  RolloutListQuerySchema,
  RolloutListSchema,
  RolloutViewSchema,
} from './rollout-schemas.js';
import { stateDataJson } from './routes-requests.js';

/*
 * /v1/rollouts: start a rollout (Idempotency-Key, the same header rules and
 * problem types as POST /v1/requests), follow it, list the tenant's. A
 * tenant only ever sees its own rollouts: another tenant's is 404, and a
 * rollout naming a target the tenant does not own is refused without
 * naming it.
 */

const security = [{ bearer: [] }];

function notFound(): ProblemError {
  return new ProblemError('not_found', 'no such rollout');
}

export function registerRolloutRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const rollouts = ctx.rollouts;

  r.post(
    '/v1/rollouts',
    {
      config: { scope: 'dispatch' },
      bodyLimit: ROLLOUT_BODY_LIMIT_BYTES,
      schema: {
        operationId: 'createRollout',
        summary: 'Start a rollout: one profile to many targets, batch by batch (idempotent by Idempotency-Key)',
        description:
          'Validates the rollout, binds the Idempotency-Key to it and starts it in the background of this instance; 202 once its first checkpoint is durable, with its report and a Location. Each target is dispatched through the normal protocol under a request id derived from the rollout, so nothing is ever applied twice. The same key with the same rollout (profile, target set, batch size, budget, mode, state data digest) answers the same rollout with `Idempotent-Replayed: true`, also once it has finished; other content is 422; while the first is still being started, 409. Keys are scoped by tenant and actor and kept as long as the rollout (at least 24 hours). A custom profile needs the dispatch:custom scope too.',
        tags: ['rollouts'],
        security,
        headers: IdempotencyKeyHeadersSchema,
        body: CreateRolloutBodySchema,
        response: {
          202: { description: 'started (or the rollout this key already started); Location names it', content: { 'application/json': { schema: RolloutViewSchema } } },
          ...problemResponses(
            'invalid_request',
            'invalid_idempotency_key',
            'unauthorized',
            'forbidden',
            'target_not_owned',
            'key_in_flight',
            'payload_too_large',
            'unsupported_media_type',
            'key_mismatch',
            'invalid_state_data',
            'unavailable',
          ),
        },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const key = parseIdempotencyKey(request.headers['idempotency-key']);
      if (!key.ok) throw new ProblemError('invalid_idempotency_key', keyProblemDetail(key.why), { reason: key.why });
      const body = request.body;
      if (body.profile === 'custom') requireScope(principal, 'dispatch:custom');
      const registry = ctx.tokens();
      const foreign = body.targets.filter((target) => registry.ownerOf(target) !== principal.tenant).length;
      // How many, never which: an id the tenant does not own may be another tenant's.
      if (foreign > 0) throw new ProblemError('target_not_owned', `${foreign} of the targets are not your tenant’s`);
      const data = stateDataJson(body.state_data);
      const created = await rollouts.create({ tenant: principal.tenant, actor: principal.actor }, key.key, {
        profile: body.profile,
        targets: body.targets,
        ...(body.batch_size === undefined ? {} : { batchSize: body.batch_size }),
        ...(body.max_unresolved === undefined ? {} : { maxUnresolved: body.max_unresolved }),
        ...(body.dry_run === undefined ? {} : { dryRun: body.dry_run }),
        ...(data === undefined ? {} : { stateDataJson: data }),
      });
      switch (created.outcome) {
        case 'started':
        case 'replayed':
          reply.code(202).header('location', `/v1/rollouts/${created.report.rollout_id}`);
          if (created.outcome === 'replayed') reply.header('idempotent-replayed', 'true');
          return reply.send(created.report);
        case 'key_mismatch':
          throw new ProblemError('key_mismatch', 'this Idempotency-Key was already used for another rollout (profile, targets, batch size, budget, mode or state data); use a new key');
        case 'key_in_flight':
          throw new ProblemError('key_in_flight', 'a rollout with this Idempotency-Key is still being started; retry shortly', { retryAfterS: 1 });
      }
    },
  );

  r.get(
    '/v1/rollouts/:id',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'getRollout',
        summary: 'A rollout’s report: its progress while it runs, the final report once it ended',
        tags: ['rollouts'],
        security,
        params: RolloutIdParamsSchema,
        response: { 200: RolloutViewSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'not_found', 'unavailable') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { id } = request.params;
      if (!isRequestId(id)) throw new ProblemError('invalid_request', 'not a rollout id');
      const report = await rollouts.get(principal.tenant, id);
      if (report === undefined) throw notFound();
      return report;
    },
  );

  r.get(
    '/v1/rollouts',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'listRollouts',
        summary: 'The tenant’s rollouts on this instance, a page at a time (keyset by rollout id)',
        tags: ['rollouts'],
        security,
        querystring: RolloutListQuerySchema,
        response: { 200: RolloutListSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'unavailable') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { limit, cursor } = request.query;
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      if (cursor !== undefined && after === undefined) throw new ProblemError('invalid_request', 'the cursor is not one this service handed out');
      const page = await rollouts.list(principal.tenant, { limit, ...(after === undefined ? {} : { after }) });
      const last = page.items.at(-1);
      return { items: page.items, next_cursor: page.more && last !== undefined ? encodeCursor(last.rollout_id) : null };
    },
  );
}
