import type { ChangeFeed } from './change-feed.js';

/** What the dashboard needs from the service (ServiceContext.dashboard). */
export interface DashboardContext {
  /** Every record change this service commits, as it commits it. */
  readonly feed: ChangeFeed;
  /** The built front end (apps/dashboard/dist); undefined: /ui answers 404. */
  readonly assetsDir: string | undefined;
  /** The rollout workspace the rollout pages read; undefined: no rollout pages. */
  readonly rolloutWorkspace: string | undefined;
}

/** ServiceOptions.dashboard. */
export interface DashboardOptions {
  /** Default: the front end built beside the service (see defaultAssetsDir); null: none. */
  readonly assetsDir?: string | null;
  readonly rolloutWorkspace?: string;
}
