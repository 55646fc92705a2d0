import { MasterRunnerError, admit, isRecordId, reconcile, type AdmissionResult } from '@oduflow/master-runner';
import { ProtocolError, canonicalJson, type RequestRecord, type RequestState } from '@oduflow/protocol';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { principalOf, requireScope } from './auth.js';
import type { ServiceContext } from './context.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { IdempotencyKeyHeadersSchema, keyProblemDetail, parseIdempotencyKey } from './idempotency-key.js';
import { ProblemError, problemResponses } from './problems.js';
import {
  CreateRequestBodySchema,
  ListQuerySchema,
  ReconcileBodySchema,
  RecordListSchema,
  RecordViewSchema,
  RequestHistoryViewSchema,
  RequestIdParamsSchema,
  historyView,
  recordView,
} from './schemas.js';
import type { Principal } from './tokens.js';

/*
 * /v1/requests: admission (Idempotency-Key, the outbox), reading, listing and
 * reconciling. A tenant sees only requests on targets it owns; any other
 * request is 404, so its existence is not revealed.
 */

const ADMISSION_ACTION = 'request.create';

const security = [{ bearer: [] }];

function owned(ctx: ServiceContext, principal: Principal, record: RequestRecord | undefined): record is RequestRecord {
  return record !== undefined && record.minion_id !== null && ctx.tokens().ownerOf(record.minion_id) === principal.tenant;
}

function notFound(): ProblemError {
  return new ProblemError('not_found', 'no such request');
}

function requestId(id: string): string {
  if (!isRecordId(id)) throw new ProblemError('invalid_request', 'not a request id');
  return id;
}

/** The canonical JSON of the caller's high data; the protocol's code when it is outside the canonical domain. */
export function stateDataJson(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  try {
    return canonicalJson(value);
  } catch (error) {
    if (ProtocolError.isInstance(error)) throw new ProblemError('invalid_state_data', error.message, { reason: error.code });
    throw error;
  }
}

function accepted(reply: FastifyReply, record: RequestRecord, replayed: boolean): FastifyReply {
  reply.code(202).header('location', `/v1/requests/${encodeURIComponent(record.request_id)}`);
  if (replayed) reply.header('idempotent-replayed', 'true');
  return reply.send(recordView(record));
}

export function registerRequestRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const log = ctx.deps.logger;

  /** Refuses a blocked admission, naming the blocker only when the tenant may see it. */
  async function blocked(error: MasterRunnerError, principal: Principal): Promise<ProblemError> {
    const blocker = error.requestId === undefined ? undefined : await ctx.deps.store.get(error.requestId);
    const visible = owned(ctx, principal, blocker);
    return new ProblemError(
      'target_blocked',
      visible
        ? `the target has an unresolved request (${blocker.request_id}, ${blocker.state}); wait for it, or have it reconciled`
        : 'the target is blocked by a record the operator must reconcile',
      { ...(error.detail === undefined ? {} : { reason: error.detail }), ...(visible ? { blocking_request_id: blocker.request_id } : {}) },
    );
  }

  r.post(
    '/v1/requests',
    {
      config: { scope: 'dispatch' },
      schema: {
        operationId: 'createRequest',
        summary: 'Admit a managed apply (idempotent by Idempotency-Key)',
        description:
          'Records the request, binds the Idempotency-Key and puts it in the outbox in one atomic step; the relay publishes it once. 202 with the record and a Location for an admitted request and for one the minion refused at its capability check (state rejected, terminal). The same key with the same content answers the same request with `Idempotent-Replayed: true`. Keys are scoped by tenant, actor and action and kept at least 24 hours. A custom profile needs the dispatch:custom scope too.',
        tags: ['requests'],
        security,
        headers: IdempotencyKeyHeadersSchema,
        body: CreateRequestBodySchema,
        response: {
          202: { description: 'admitted (or rejected by the minion’s capability check); Location names the request', content: { 'application/json': { schema: RecordViewSchema } } },
          ...problemResponses(
            'invalid_request',
            'invalid_idempotency_key',
            'unauthorized',
            'forbidden',
            'target_not_owned',
            'target_blocked',
            'key_in_flight',
            'payload_too_large',
            'unsupported_media_type',
            'key_mismatch',
            'invalid_state_data',
            'no_target',
            'minion_unreachable',
            'store_busy',
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
      if (ctx.tokens().ownerOf(body.minion_id) !== principal.tenant) {
        throw new ProblemError('target_not_owned', 'this target is not one of your tenant’s');
      }
      const data = stateDataJson(body.state_data);
      let result: AdmissionResult;
      try {
        result = await admit(
          ctx.deps,
          { minionId: body.minion_id, profile: body.profile, ...(data === undefined ? {} : { stateDataJson: data }) },
          { scope: { tenant: principal.tenant, actor: principal.actor, action: ADMISSION_ACTION, key: key.key } },
        );
      } catch (error) {
        const outcome = MasterRunnerError.isInstance(error) ? error.code : 'error';
        ctx.metrics.admission(outcome);
        request.log.info({ minion_id: body.minion_id, outcome }, 'admission refused');
        if (MasterRunnerError.isInstance(error) && error.code === 'target_blocked') throw await blocked(error, principal);
        throw error;
      }
      ctx.metrics.admission(result.outcome);
      switch (result.outcome) {
        case 'admitted':
        case 'rejected':
        case 'replayed': {
          const { record } = result;
          request.log.info(
            { request_id: record.request_id, minion_id: record.minion_id, jid: record.jid, state: record.state, outcome: result.outcome },
            'admission',
          );
          if (result.outcome === 'admitted') ctx.onAdmitted(record);
          return accepted(reply, record, result.outcome === 'replayed');
        }
        case 'key_mismatch':
          throw new ProblemError('key_mismatch', 'this Idempotency-Key was already used with another minion, profile or state data; use a new key');
        case 'key_in_flight':
          throw new ProblemError('key_in_flight', 'an admission with this Idempotency-Key is still in flight; retry shortly', { retryAfterS: 1 });
      }
    },
  );

  r.get(
    '/v1/requests/:id',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'getRequest',
        summary: 'One request record',
        tags: ['requests'],
        security,
        params: RequestIdParamsSchema,
        response: { 200: RecordViewSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'not_found') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const record = await ctx.deps.store.get(requestId(request.params.id));
      if (!owned(ctx, principal, record)) throw notFound();
      return recordView(record);
    },
  );

  r.get(
    '/v1/requests/:id/history',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'getRequestHistory',
        summary: 'One request’s history: each committed change with its time and source of evidence',
        description:
          'Written by the store in the same atomic step as each change of the record. Closed codes only: never state data, output or an operator’s reason (the record has that). Capped per request.',
        tags: ['requests'],
        security,
        params: RequestIdParamsSchema,
        response: { 200: RequestHistoryViewSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'not_found') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const id = requestId(request.params.id);
      // Ownership is the record's, exactly as GET /v1/requests/{id} decides it.
      if (!owned(ctx, principal, await ctx.deps.store.get(id))) throw notFound();
      const history = await ctx.deps.store.history(id);
      if (history === undefined) throw notFound();
      return historyView(id, history);
    },
  );

  r.get(
    '/v1/requests',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'listRequests',
        summary: 'The tenant’s requests, a page at a time (keyset by request id)',
        tags: ['requests'],
        security,
        querystring: ListQuerySchema,
        response: { 200: RecordListSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { state, minion_id: minionId, limit, cursor } = request.query;
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      if (cursor !== undefined && after === undefined) throw new ProblemError('invalid_request', 'the cursor is not one this service handed out');
      const registry = ctx.tokens();
      const targets = minionId === undefined ? registry.minionsOf(principal.tenant) : registry.ownerOf(minionId) === principal.tenant ? [minionId] : [];
      if (targets.length === 0) return { items: [], next_cursor: null };
      const states = state === undefined ? undefined : (state.split(',') as RequestState[]);
      const records = await ctx.deps.store.list(
        { minionIds: targets, ...(states === undefined ? {} : { states }) },
        { limit: limit + 1, ...(after === undefined ? {} : { after }) },
      );
      const page = records.slice(0, limit);
      const last = page.at(-1);
      return { items: page.map(recordView), next_cursor: records.length > limit && last !== undefined ? encodeCursor(last.request_id) : null };
    },
  );

  r.post(
    '/v1/requests/:id/reconcile',
    {
      config: { scope: 'reconcile' },
      schema: {
        operationId: 'reconcileRequest',
        summary: 'Resolve a request by operator decision (never publishes)',
        description:
          'Records who decided (the token’s actor) and why, and unblocks the target. For a request that is prepared, publishing, published, running, unknown, quarantined or legacy; a settled one is 409 illegal_transition.',
        tags: ['requests'],
        security,
        params: RequestIdParamsSchema,
        body: ReconcileBodySchema,
        response: { 200: RecordViewSchema, ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'not_found', 'illegal_transition') },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const id = requestId(request.params.id);
      if (!owned(ctx, principal, await ctx.deps.store.get(id))) throw notFound();
      const record = await reconcile(ctx.deps, id, { reason: request.body.reason, actor: principal.actor });
      log.info({ request_id: record.request_id, minion_id: record.minion_id, jid: record.jid, state: record.state, actor: principal.actor }, 'reconciled over HTTP');
      return recordView(record);
    },
  );
}
