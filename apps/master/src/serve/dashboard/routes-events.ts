import { isRequestId } from '@oduflow/protocol';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../auth.js';
import type { ServiceContext } from '../context.js';
import { ProblemError, problemResponses } from '../problems.js';
import type { Principal } from '../tokens.js';
import type { RecordChange } from './change-feed.js';
import { openEventStream, type EventStream } from './events-stream.js';
import { blockerView } from './overview.js';
import { requestPage } from './read-models.js';
import { findRollout, type FoundRollout } from './rollout-views.js';
import type { RolloutWatch } from './rollout-watch.js';
import type { RequestPage } from './timeline.js';

/*
 * GET /v1/events: the tenant's record changes as server-sent events, fed by
 * this service's own commits (the change feed), never by polling the store.
 * Events:
 *   ready    {}                          once, when the stream is open
 *   request  {seq, before, page, blocker} a request of the tenant changed: the
 *                                        state before, its page (record,
 *                                        timeline, receipt) as it is now, and
 *                                        its row in the overview's tables
 *   rollout  {report}                    with ?rollout=<run id>: that
 *                                        rollout's report, whenever it changes
 * A client that reconnects reloads what it shows: events are not replayed.
 * A token removed from the tokens file (SIGHUP) ends its streams.
 */

const MAX_EVENT_STREAMS = 256;

export function registerEventRoutes(app: FastifyInstance, ctx: ServiceContext, rollouts: RolloutWatch | undefined): void {
  const streams = new Set<EventStream>();
  // A change's page is built once, however many streams send it: one history read per change, and only when a stream wants it.
  const pages = new WeakMap<RecordChange, Promise<RequestPage>>();
  const pageOf = (change: RecordChange): Promise<RequestPage> => {
    let page = pages.get(change);
    if (page === undefined) {
      page = ctx.deps.store.history(change.record.request_id).then(
        (history) => requestPage(change.record, history),
        // The change is durable either way; a history that cannot be read leaves the record's own timeline.
        () => requestPage(change.record),
      );
      pages.set(change, page);
    }
    return page;
  };

  app.addHook('preClose', (done) => {
    // Open streams would hold the listener open forever: end them, the clients reconnect elsewhere.
    for (const stream of [...streams]) stream.close();
    done();
  });

  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/events',
    {
      config: { scope: 'read' },
      schema: {
        operationId: 'events',
        summary: 'The tenant’s record changes as server-sent events (text/event-stream)',
        description:
          'Events `ready` {} once open, `request` {seq, before, page: {record, timeline, receipt, blocking, reconcilable}, blocker} for every change this service instance commits to a request of the tenant, and with `rollout=<id>` also `rollout` {report} whenever that rollout’s report changes. Not replayed after a reconnect: reload, then follow. Changes committed by another process on the same store are not sent.',
        tags: ['requests'],
        security: [{ bearer: [] }],
        querystring: z.strictObject({ rollout: z.string().max(64).optional().describe('a rollout to follow: its id (POST /v1/rollouts), or the run id of one run by the CLI') }),
        response: {
          200: { description: 'the event stream', content: { 'text/event-stream': { schema: z.string() } } },
          ...problemResponses('invalid_request', 'unauthorized', 'forbidden', 'not_found', 'unavailable'),
        },
      },
    },
    async (request, reply) => {
      let principal: Principal = principalOf(request);
      const rolloutId = request.query.rollout;
      let rollout: FoundRollout | undefined;
      if (rolloutId !== undefined) {
        if (!isRequestId(rolloutId)) throw new ProblemError('invalid_request', 'not a rollout id');
        rollout = rollouts === undefined ? undefined : await findRollout(ctx.rollouts, ctx.dashboard.rolloutWorkspace, principal.tenant, rolloutId, (id) => ctx.tokens().ownerOf(id));
        if (rollout === undefined) throw new ProblemError('not_found', 'no such rollout');
      }
      if (streams.size >= MAX_EVENT_STREAMS) throw new ProblemError('unavailable', 'too many open event streams; retry later', { retryAfterS: 5 });

      const authorization = request.headers.authorization;
      let registry = ctx.tokens();
      /** The token still authenticates as the same principal (re-checked once after each tokens-file reload). */
      const stillValid = (): boolean => {
        const current = ctx.tokens();
        if (current === registry) return true;
        registry = current;
        const again = current.authenticate(authorization);
        if (again?.tokenId !== principal.tokenId || again.tenant !== principal.tenant || !again.scopes.has('read')) return false;
        principal = again;
        return true;
      };

      const stream = openEventStream(request, reply);
      streams.add(stream);
      let sending: Promise<void> = Promise.resolve();
      const unsubscribe = ctx.dashboard.feed.subscribe((change) => {
        const minionId = change.record.minion_id;
        if (!stillValid()) return stream.close();
        if (minionId === null || ctx.tokens().ownerOf(minionId) !== principal.tenant) return;
        // Sent in the order the changes were committed, each once its page is built.
        sending = sending
          .then(() => pageOf(change))
          .then((page) => {
            stream.send('request', { seq: change.seq, before: change.before, page, blocker: blockerView(change.record) });
          })
          // One change that could not be sent must not hold back the ones after it.
          .catch(() => undefined);
      });
      const followed = rollout;
      const unfollow =
        followed === undefined || rollouts === undefined
          ? () => undefined
          : rollouts.subscribe(followed.key, followed.watch, (report) => {
              if (!stillValid()) return stream.close();
              // Still only the tenant's: a later batch of a CLI rollout could reach a target of another tenant.
              if (!followed.stillVisible(report)) return stream.close();
              stream.send('rollout', { report });
            });
      stream.send('ready', {});
      void stream.closed.then(() => {
        unsubscribe();
        unfollow();
        streams.delete(stream);
      });
      return reply;
    },
  );
}
