import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ProblemError } from '../problems.js';
import { SECURITY_HEADERS, type Asset, type DashboardAssets } from './assets.js';

/*
 * GET /ui and everything under it: the dashboard's static front end. Open
 * (the shell holds no data; every datum comes from an authenticated call),
 * always with the strict security headers. A path that is not a built file
 * is a page of the single-page app and gets the HTML shell; /ui/api/* is
 * never the shell.
 */

function send(request: FastifyRequest, reply: FastifyReply, asset: Asset): FastifyReply {
  reply.headers(SECURITY_HEADERS);
  reply.header('etag', asset.etag);
  reply.header('cache-control', asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  return reply.type(asset.type).serializer((payload) => payload as string).send(asset.body);
}

export function registerAssetRoutes(app: FastifyInstance, assets: DashboardAssets | undefined): void {
  const missing = (): never => {
    throw new ProblemError('not_found', 'the dashboard is not installed with this service (build apps/dashboard)');
  };
  app.get('/ui', { schema: { hide: true } }, async (_request, reply) => reply.headers(SECURITY_HEADERS).redirect('/ui/', 308));
  app.get('/ui/*', { schema: { hide: true } }, async (request, reply) => {
    if (assets === undefined) return missing();
    const path = (request.params as { '*': string })['*'];
    if (path.startsWith('api/') || path === 'api') throw new ProblemError('not_found', 'no such route');
    const file = assets.files.get(path);
    if (file !== undefined && path !== 'index.html') return send(request, reply, file);
    // A missing asset is a 404, not the shell (a stale page asking for an old bundle must fail visibly).
    if (path.startsWith('assets/')) throw new ProblemError('not_found', 'no such file');
    return send(request, reply, assets.index);
  });
}
