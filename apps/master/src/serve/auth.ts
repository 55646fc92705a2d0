import type { FastifyRequest } from 'fastify';
import { ProblemError } from './problems.js';
import type { Principal, Scope, TokenRegistry } from './tokens.js';

/*
 * Authentication and the scope a route needs (its `config.scope`). Routes
 * without a scope (health, readiness, metrics, the OpenAPI document) are
 * open. A tenant only ever sees its own targets and their requests; the
 * routes check ownership with `owns`.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; none: the route is open. */
    readonly scope?: Scope;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

export function authenticate(request: FastifyRequest, tokens: TokenRegistry): void {
  const scope = request.routeOptions.config.scope;
  if (scope === undefined) return;
  const principal = tokens.authenticate(request.headers.authorization);
  if (principal === undefined) throw new ProblemError('unauthorized', 'send a valid token as Authorization: Bearer <token>');
  request.principal = principal;
  requireScope(principal, scope);
}

export function requireScope(principal: Principal, scope: Scope): void {
  if (!principal.scopes.has(scope)) {
    throw new ProblemError('forbidden', `this operation needs the ${scope} scope`, { required_scope: scope });
  }
}

/** The authenticated caller of a route that has a scope. */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === null) throw new ProblemError('unauthorized', 'send a valid token as Authorization: Bearer <token>');
  return request.principal;
}
