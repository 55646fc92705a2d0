import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import { errorLogFields } from './error-mapping.js';

/*
 * fastify's own log lines, tamed: no per-request lines (app.ts writes one
 * access line per exchange), and the error lines fastify still writes
 * (a failed response serialization, a broken stream) carry the error's
 * kind and code only, never its message (a message may quote a body).
 */
export class ServiceLogController extends LogController {
  constructor() {
    super({ requestIdLogLabel: 'http_id', disableRequestLogging: true });
  }

  override defaultErrorLog(error: Error, _request: FastifyRequest, reply: FastifyReply): void {
    reply.log.error(errorLogFields(error), 'request failed');
  }

  override streamError(error: Error, _request: FastifyRequest, reply: FastifyReply): void {
    reply.log.warn(errorLogFields(error), 'the response stream failed');
  }

  override writeHeadError(error: Error, _request: FastifyRequest, reply: FastifyReply): void {
    reply.log.warn(errorLogFields(error), 'the response headers could not be written');
  }

  override serializerError(error: Error, _request: FastifyRequest, reply: FastifyReply, metadata: { statusCode: number }): void {
    reply.log.error({ ...errorLogFields(error), status: metadata.statusCode }, 'a response could not be serialized');
  }
}
