import { DEFAULT_POLL_INTERVAL_MS, DEFAULT_ROLLOUT_CONCURRENCY, DEFAULT_STAGE_TIMEOUT_MS, MAX_ROLLOUT_CONCURRENCY, MasterRunnerError } from '@oduflow/master-runner';
import { rolloutWorkspace } from '../rollout/command.js';
import type { Env } from '../wiring.js';
import type { RolloutServiceOptions } from './rollout-service.js';

/*
 * `serve`'s rollout settings: each a flag, else an environment variable,
 * else the default. The workspace defaults exactly like the `rollout`
 * command's (ODUFLOW_ROLLOUT_WORKSPACE, else `rollouts/` beside a file
 * store's directory, else /var/lib/oduflow/rollouts), so the CLI can show
 * and resume what the service ran.
 */

export interface RolloutServeFlags {
  readonly store?: string;
  readonly rolloutWorkspace?: string;
  readonly rolloutStageTimeout?: string;
  readonly rolloutPollInterval?: string;
  readonly rolloutConcurrency?: string;
}

function pick(flag: string | undefined, env: Env, name: string): string | undefined {
  const value = flag ?? env[name];
  return value === undefined || value === '' ? undefined : value;
}

function integer(value: string | undefined, fallback: number, min: number, max: number, what: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new MasterRunnerError('config_invalid', `${what} must be a whole number from ${min} to ${max}`);
  }
  return n;
}

export function rolloutServeConfig(flags: RolloutServeFlags, env: Env): RolloutServiceOptions {
  let workspace: string;
  try {
    workspace = rolloutWorkspace({ ...(flags.store === undefined ? {} : { store: flags.store }), ...(flags.rolloutWorkspace === undefined ? {} : { workspace: flags.rolloutWorkspace }) }, env);
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) throw new MasterRunnerError('config_invalid', 'the rollout workspace must be an absolute path');
    throw error;
  }
  return {
    workspace,
    stageTimeoutMs: integer(pick(flags.rolloutStageTimeout, env, 'ODUFLOW_ROLLOUT_STAGE_TIMEOUT_MS'), DEFAULT_STAGE_TIMEOUT_MS, 1_000, 7 * 24 * 3_600_000, 'the rollout stage timeout (ms)'),
    pollIntervalMs: integer(pick(flags.rolloutPollInterval, env, 'ODUFLOW_ROLLOUT_POLL_INTERVAL_MS'), DEFAULT_POLL_INTERVAL_MS, 10, 3_600_000, 'the rollout poll interval (ms)'),
    concurrency: integer(pick(flags.rolloutConcurrency, env, 'ODUFLOW_ROLLOUT_CONCURRENCY'), DEFAULT_ROLLOUT_CONCURRENCY, 1, MAX_ROLLOUT_CONCURRENCY, 'the rollout concurrency'),
  };
}
