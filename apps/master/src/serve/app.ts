import fastifySwagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { randomUUID } from 'node:crypto';
import { authenticate } from './auth.js';
import type { ServiceContext } from './context.js';
import { registerDashboard } from './dashboard/plugin.js';
import { errorLogFields, toProblem } from './error-mapping.js';
import { ServiceLogController } from './log-controller.js';
import { ProblemError, sendProblem } from './problems.js';
import { registerOpsRoutes } from './routes-ops.js';
import { registerRequestRoutes } from './routes-requests.js';
import { registerRolloutRoutes } from './routes-rollouts.js';
import { registerTargetRoutes } from './routes-targets.js';

/*
 * The HTTP application, without a listening socket: service.ts listens,
 * tests use app.inject. Logging goes through the master logger (pino, with
 * its redaction): fastify's own request logging is off, and each exchange
 * leaves one access-log line without headers or bodies.
 */

const API_VERSION = '1.0.0';
/** Large enough for 64 KiB of canonical high data sent with some whitespace and escapes. */
const BODY_LIMIT_BYTES = 256 * 1024;

export async function buildApp(ctx: ServiceContext): Promise<FastifyInstance> {
  const app = Fastify({
    // pino's Logger, typed as fastify's view of it (the same object).
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- it sets Fastify()'s logger type parameter: with pino's type the instance is no FastifyInstance
    loggerInstance: ctx.deps.logger as FastifyBaseLogger,
    logController: new ServiceLogController(),
    genReqId: () => randomUUID(),
    bodyLimit: BODY_LIMIT_BYTES,
    // A body that pollutes prototypes is refused (400), not cleaned silently.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.decorateRequest('principal', null);
  // JSON only: a text/plain body is 415, not a string handed to the body schema.
  app.removeContentTypeParser(['text/plain']);

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'oduflow master',
        version: API_VERSION,
        description:
          'Durable, exactly-once-effect Salt applies: admit a request (Idempotency-Key), follow its record to a JID-bound receipt, reconcile what stays unresolved. Errors are RFC 9457 problems (application/problem+json) whose type is https://oduflow.dev/problems/<code>.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token listed (hashed) in the tokens file' } } },
      tags: [{ name: 'requests' }, { name: 'rollouts' }, { name: 'targets' }, { name: 'operations' }],
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });

  // eslint-disable-next-line @typescript-eslint/require-await -- fastify waits for a done callback unless a hook returns a promise: async is the promise style
  app.addHook('onRequest', async (request) => {
    if (ctx.draining() && request.routeOptions.config.scope !== undefined) {
      throw new ProblemError('unavailable', 'the service is shutting down; retry against another instance or later', { retryAfterS: 5 });
    }
    authenticate(request, ctx.tokens());
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    ctx.metrics.httpRequest(route, request.method, reply.statusCode, reply.elapsedTime / 1000);
    request.log.info(
      {
        method: request.method,
        route,
        path: request.url.split('?')[0],
        status: reply.statusCode,
        duration_ms: Math.round(reply.elapsedTime * 10) / 10,
        tenant: request.principal?.tenant,
        token_id: request.principal?.tokenId,
      },
      'http',
    );
  });

  app.setErrorHandler(async (error, request, reply) => {
    const problem = toProblem(error);
    if (problem.code === 'internal') request.log.error(errorLogFields(error), 'request failed');
    return sendProblem(request, reply, problem);
  });
  app.setNotFoundHandler(async (request, reply) => sendProblem(request, reply, new ProblemError('not_found', 'no such route')));

  registerRequestRoutes(app, ctx);
  registerRolloutRoutes(app, ctx);
  registerTargetRoutes(app, ctx);
  registerOpsRoutes(app, ctx);
  registerDashboard(app, ctx);
  return app;
}
