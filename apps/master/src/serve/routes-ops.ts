import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ServiceContext } from './context.js';
import { HealthSchema, ReadinessSchema } from './schemas.js';

/*
 * The open routes: liveness, readiness, metrics and the OpenAPI document.
 * None needs a token and none shows a request, a target or a tenant.
 */

/** A request id no record has: reading it proves the store answers. */
const PROBE_ID = '00000000-0000-4000-8000-000000000000';
const STORE_PROBE_TIMEOUT_MS = 2_000;

async function storeAnswers(ctx: ServiceContext): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), STORE_PROBE_TIMEOUT_MS)));
  try {
    return await Promise.race([ctx.deps.store.get(PROBE_ID).then(() => true, () => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function registerOpsRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get(
    '/healthz',
    { schema: { operationId: 'health', summary: 'The process serves', tags: ['operations'], response: { 200: HealthSchema } } },
    () => ({ status: 'ok' as const }),
  );

  r.get(
    '/readyz',
    {
      schema: {
        operationId: 'readiness',
        summary: 'The store answers a read and salt-api accepts a login; 503 otherwise or while shutting down',
        tags: ['operations'],
        response: { 200: ReadinessSchema, 503: ReadinessSchema },
      },
    },
    async (_request, reply) => {
      const [store, saltApi] = await Promise.all([storeAnswers(ctx), ctx.saltReadiness()]);
      const draining = ctx.draining();
      const ready = store && saltApi === 'ok' && !draining;
      return reply.code(ready ? 200 : 503).send({ ready, store: store ? 'ok' : 'failed', salt_api: saltApi, draining });
    },
  );

  r.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        summary: 'Prometheus metrics (text exposition format)',
        tags: ['operations'],
        response: { 200: { description: 'the exposition', content: { 'text/plain': { schema: z.string() } } } },
      },
    },
    async (_request, reply) => {
      const text = await ctx.metrics.registry.metrics();
      // Sent as is: a string with a text content type is not serialized.
      return reply.type(ctx.metrics.registry.contentType).serializer((payload) => payload as string).send(text);
    },
  );

  r.get('/openapi.json', { schema: { hide: true } }, () => app.swagger());
}
