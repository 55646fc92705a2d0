import { MasterRunnerError } from '@oduflow/master-runner';
import type { CommonFlags } from '../config.js';

/*
 * `serve`'s own settings: each a flag, else an environment variable, else
 * the default. Checked before the store is opened or a credential is read,
 * so a misconfigured service refuses to start having touched nothing.
 */

export interface ServeFlags extends CommonFlags {
  readonly host?: string;
  readonly port?: string;
  readonly tokensFile?: string;
  readonly keyRetentionHours?: string;
  readonly acceptLegacy?: boolean;
  readonly relayConcurrency?: string;
  readonly relayLeaseMs?: string;
  readonly pollConcurrency?: string;
  readonly pollWalkInterval?: string;
  readonly eventStream?: string;
}

export interface ServeConfig {
  readonly host: string;
  readonly port: number;
  readonly tokensFile: string;
  readonly keyRetentionMs: number;
  readonly acceptLegacy: boolean;
  readonly relayConcurrency: number;
  /** How long an outbox entry this instance claimed is skipped by the other instances' relays. */
  readonly relayLeaseMs: number;
  readonly pollConcurrency: number;
  readonly pollWalkEveryMs: number;
  readonly eventStream: boolean;
}

const SERVE_DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 8470,
  keyRetentionHours: 24,
  relayConcurrency: 4,
  relayLeaseMs: 120_000,
  pollConcurrency: 64,
  pollWalkIntervalMs: 30_000,
});

/** Idempotency keys are kept at least this long (the API promises 24 h). */
const MIN_KEY_RETENTION_HOURS = 24;

type Env = Readonly<Record<string, string | undefined>>;

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

function bool(flag: boolean | undefined, env: Env, name: string): boolean {
  if (flag === true) return true;
  const value = env[name];
  if (value === undefined || value === '' || value === '0' || value === 'false' || value === 'no') return false;
  if (value === '1' || value === 'true' || value === 'yes') return true;
  throw new MasterRunnerError('config_invalid', `${name} must be 1/true/yes or 0/false/no`);
}

export function serveConfig(flags: ServeFlags, env: Env): ServeConfig {
  const tokensFile = pick(flags.tokensFile, env, 'ODUFLOW_TOKENS_FILE');
  if (tokensFile === undefined) throw new MasterRunnerError('config_invalid', 'set --tokens-file or ODUFLOW_TOKENS_FILE');
  const eventStream = pick(flags.eventStream, env, 'ODUFLOW_EVENT_STREAM') ?? 'on';
  if (eventStream !== 'on' && eventStream !== 'off') throw new MasterRunnerError('config_invalid', 'the event stream setting must be on or off');
  const retentionHours = integer(
    pick(flags.keyRetentionHours, env, 'ODUFLOW_KEY_RETENTION_HOURS'),
    SERVE_DEFAULTS.keyRetentionHours,
    MIN_KEY_RETENTION_HOURS,
    24 * 3650,
    'the key retention (hours)',
  );
  return {
    host: pick(flags.host, env, 'ODUFLOW_LISTEN_HOST') ?? SERVE_DEFAULTS.host,
    port: integer(pick(flags.port, env, 'ODUFLOW_LISTEN_PORT'), SERVE_DEFAULTS.port, 0, 65535, 'the listen port'),
    tokensFile,
    keyRetentionMs: retentionHours * 3_600_000,
    acceptLegacy: bool(flags.acceptLegacy, env, 'ODUFLOW_ACCEPT_LEGACY'),
    relayConcurrency: integer(pick(flags.relayConcurrency, env, 'ODUFLOW_RELAY_CONCURRENCY'), SERVE_DEFAULTS.relayConcurrency, 1, 64, 'the relay concurrency'),
    // A lease that lapses while its holder is still at work is safe (another relay publishes only a record
    // still `prepared`), it only costs a redundant look; it bounds how long a dead instance's claims wait.
    relayLeaseMs: integer(pick(flags.relayLeaseMs, env, 'ODUFLOW_RELAY_LEASE_MS'), SERVE_DEFAULTS.relayLeaseMs, 1_000, 3_600_000, 'the relay lease (ms)'),
    pollConcurrency: integer(pick(flags.pollConcurrency, env, 'ODUFLOW_POLL_CONCURRENCY'), SERVE_DEFAULTS.pollConcurrency, 1, 1024, 'the poll concurrency'),
    pollWalkEveryMs: integer(
      pick(flags.pollWalkInterval, env, 'ODUFLOW_POLL_WALK_INTERVAL_MS'),
      SERVE_DEFAULTS.pollWalkIntervalMs,
      100,
      3_600_000,
      'the poll walk interval (ms)',
    ),
    eventStream: eventStream === 'on',
  };
}
