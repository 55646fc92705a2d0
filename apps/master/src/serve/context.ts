import type { Logger, MasterDeps } from '@oduflow/master-runner';
import type { RequestRecord } from '@oduflow/protocol';
import type { DashboardContext } from './dashboard/dashboard-context.js';
import type { ServiceMetrics } from './metrics.js';
import type { RolloutService } from './rollout-service.js';
import type { TokenRegistry } from './tokens.js';

/** What the HTTP routes work with; built by service.ts, or by a test around app.inject. */
export interface ServiceContext {
  /** The store, the one shared salt-api client, the logger, the clock. */
  readonly deps: MasterDeps & { readonly logger: Logger };
  /** The tokens file as last loaded. */
  tokens(): TokenRegistry;
  readonly metrics: ServiceMetrics;
  /** An admission stored a request in the outbox: the relay should look now. */
  onAdmitted(record: RequestRecord): void;
  /** salt-api accepts a login: 'ok', or why not. */
  saltReadiness(): Promise<string>;
  /** Unbound legacy records (they name no target, so they block every target), as found at start. */
  readonly unboundLegacy: readonly string[];
  /** True once shutdown began: readiness fails, new work is refused. */
  draining(): boolean;
  /** The operator dashboard (/ui, /v1/events): the change feed, its assets, the rollout workspace. */
  readonly dashboard: DashboardContext;
  /** Rollouts run in this process (disabled without a rollout workspace). */
  readonly rollouts: RolloutService;
}
