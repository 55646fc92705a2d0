import { MasterRunnerError } from '@oduflow/master-runner';
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../context.js';
import { loadDashboardAssets } from './assets.js';
import { createRolloutWatch } from './rollout-watch.js';
import { registerAssetRoutes } from './routes-assets.js';
import { registerEventRoutes } from './routes-events.js';
import { registerUiApiRoutes } from './routes-ui-api.js';

/*
 * The operator dashboard, registered in one place: the front end under
 * /ui, its read models under /ui/api, and the server-sent events of
 * /v1/events. Same authentication and scopes as the rest of the API.
 */

export function registerDashboard(app: FastifyInstance, ctx: ServiceContext): void {
  const log = ctx.deps.logger;
  const { assetsDir, rolloutWorkspace } = ctx.dashboard;
  let assets;
  try {
    assets = assetsDir === undefined ? undefined : loadDashboardAssets(assetsDir);
  } catch (error) {
    log.warn({ code: error instanceof Error ? error.name : 'error' }, 'the dashboard assets could not be read; /ui answers 404');
  }
  if (assets === undefined) log.warn('the dashboard is not built: /ui answers 404 (the API is not affected)');

  const rollouts =
    rolloutWorkspace === undefined && !ctx.rollouts.enabled
      ? undefined
      : createRolloutWatch({
          onError: (key, error) => log.debug({ rollout: key, code: MasterRunnerError.isInstance(error) ? error.code : 'error' }, 'a watched rollout could not be read'),
        });
  if (rollouts !== undefined) {
    const stop = ctx.dashboard.feed.subscribe((change) => rollouts.requestChanged(change.record.request_id));
    app.addHook('onClose', (_instance, done) => {
      stop();
      rollouts.close();
      done();
    });
  }

  registerAssetRoutes(app, assets);
  registerUiApiRoutes(app, ctx);
  registerEventRoutes(app, ctx, rollouts);
}
