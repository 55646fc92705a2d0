import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SaltApiStandIn } from '../../../../../packages/master-runner/tests/support/salt-api-standin.js';
import type { PostgresCluster } from '../../../../../packages/test-harness/src/postgres.js';
import { tokenDigest } from '../../../src/serve/tokens.js';
import { cliEnv, runCli } from '../../support/cli.js';
import { spawnServe, writeTokensFile, type ServeProcess } from './serve-process.js';

/*
 * Several real `serve` processes on one fresh, migrated PostgreSQL database
 * and one salt-api stand-in: the world of the multi-instance tests. The
 * tenant "fleet" owns `minions` random targets; one bearer token has every
 * scope. The database is read back with psql (never through a store of
 * this process), so what the tests assert is what the instances committed.
 */

export const FLEET_TOKEN = 'odf_fleet-all-00000000000000000000000000000000';

export interface PgInstances {
  readonly dir: string;
  readonly env: Readonly<Record<string, string>>;
  readonly minions: readonly string[];
  /** Starts one more `serve` (extra environment on top of the world's; `entry`: another executable, e.g. the crash entry). */
  serve(extraEnv?: Readonly<Record<string, string>>, entry?: { readonly path: string; readonly args: readonly string[] }): ServeProcess;
  /** Every record in the database, as stored (every one a protocol-1 record: these tests write no legacy ones). */
  records(): Promise<ProtocolRequestRecord[]>;
  /** Every Idempotency-Key row: its scoped hash, request id and state. */
  keys(): Promise<{ readonly keyHash: string; readonly requestId: string; readonly state: string }[]>;
  /** Outbox entries left. */
  outboxSize(): Promise<number>;
  /** The outbox entries and their claims (epoch ms; null: not claimed). */
  outboxClaims(): Promise<{ readonly requestId: string; readonly claimedUntil: number | null }[]>;
  /** Targets with more than one blocking record (the partial unique index forbids it; asked anyway). */
  doublyBlockedTargets(): Promise<string[]>;
  /** SIGKILLs what is still running, removes the directory. */
  close(): Promise<void>;
}

function clientId(): string {
  return `client-${randomUUID()}`;
}

export async function startPgInstances(
  cluster: PostgresCluster,
  standIn: SaltApiStandIn,
  options: { readonly database: string; readonly minions: number; readonly env?: Readonly<Record<string, string>> },
): Promise<PgInstances> {
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-pg-instances-'));
  chmodSync(dir, 0o700);
  const minions = Array.from({ length: options.minions }, clientId);
  const url = new URL(await cluster.createDatabase(options.database));
  url.password = '';
  const passwordFile = join(dir, 'db.password');
  writeFileSync(passwordFile, `${cluster.password}\n`, { mode: 0o600 });
  chmodSync(passwordFile, 0o600);
  const tokensFile = writeTokensFile(dir, {
    tenants: { fleet: { minions } },
    tokens: [{ id: 'fleet-all', sha256: tokenDigest(FLEET_TOKEN), tenant: 'fleet', actor: 'hammer', scopes: ['read', 'dispatch', 'dispatch:custom', 'reconcile'] }],
  });
  const env: Record<string, string> = {
    ...cliEnv(dir, standIn),
    ODUFLOW_STORE: url.toString(),
    ODUFLOW_STORE_PASSWORD_FILE: passwordFile,
    ODUFLOW_TOKENS_FILE: tokensFile,
    // Generous: the machine may be loaded, and no test here waits for a call deadline to pass.
    ODUFLOW_CALL_TIMEOUT_MS: '10000',
    ...options.env,
  };
  const migrated = await runCli(['migrate', '--json'], env);
  if (migrated.code !== 0) throw new Error(`migrate failed: ${migrated.stderr}`);

  const running: ServeProcess[] = [];
  const rows = async (sql: string): Promise<string[]> => (await cluster.psql(sql, options.database)).split('\n').filter((l) => l !== '');
  return {
    dir,
    env,
    minions,
    serve: (extraEnv = {}, entry) => {
      const p = entry === undefined ? spawnServe({ ...env, ...extraEnv }) : spawnServe({ ...env, ...extraEnv }, [], entry.path, entry.args);
      running.push(p);
      return p;
    },
    records: async () => (await rows('SELECT record::text FROM oduflow.requests ORDER BY request_id')).map((l) => JSON.parse(l) as ProtocolRequestRecord),
    keys: async () =>
      (await rows(`SELECT json_build_object('keyHash', key_hash, 'requestId', request_id, 'state', state)::text FROM oduflow.idempotency_keys`)).map(
        (l) => JSON.parse(l) as { keyHash: string; requestId: string; state: string },
      ),
    outboxSize: async () => Number((await rows('SELECT count(*) FROM oduflow.outbox'))[0]),
    outboxClaims: async () =>
      (await rows(`SELECT json_build_object('requestId', request_id, 'claimedUntil', (extract(epoch FROM claimed_until) * 1000)::bigint)::text FROM oduflow.outbox`)).map(
        (l) => JSON.parse(l) as { requestId: string; claimedUntil: number | null },
      ),
    doublyBlockedTargets: () => rows('SELECT minion_id FROM oduflow.requests WHERE blocking GROUP BY minion_id HAVING count(*) > 1'),
    close: async () => {
      for (const p of running.splice(0)) {
        if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
        await p.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** POST /v1/requests as the fleet token; `signal` lets a client abort mid-flight. */
export function postRequest(
  address: string,
  key: string,
  body: { readonly minion_id: string; readonly profile: string },
  signal?: AbortSignal,
): Promise<Response> {
  return fetch(`${address}/v1/requests`, {
    method: 'POST',
    headers: { authorization: `Bearer ${FLEET_TOKEN}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
}

/** GET as the fleet token, parsed. */
export async function getJson(address: string, path: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${address}${path}`, { headers: { authorization: `Bearer ${FLEET_TOKEN}` } });
  return (await response.json()) as Record<string, unknown>;
}

/** One sample of a counter or gauge from an instance's /metrics (0 when absent). */
export async function metricValue(address: string, name: string, labels: Readonly<Record<string, string>> = {}): Promise<number> {
  const text = await (await fetch(`${address}/metrics`)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (wanted.every((w) => line.includes(w))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}
