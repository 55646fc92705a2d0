import type { ProtocolRequestRecord } from '@oduflow/protocol';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { startPostgres, type PostgresCluster } from '../../../../packages/test-harness/src/postgres.js';
import { EXIT } from '../../src/exit-codes.js';
import { assertBuilt, cliEnv, jsonOf, runCli } from '../support/cli.js';
import { spawnServe, writeTokensFile, type ServeProcess } from './support/serve-process.js';
import { ACME_A, ACME_B, TOKENS, testTokensFile, waitFor } from './support/service-world.js';

/*
 * Store selection end to end: `migrate` and `serve` on a real PostgreSQL 15,
 * reached by a URL without a password and a private password file. Two
 * services on one database both serve (the file store's one-serve rule does
 * not apply); the multi-instance hammer tests are elsewhere.
 */

let cluster: PostgresCluster;
let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;
let databases = 0;
const running: ServeProcess[] = [];

beforeAll(async () => {
  assertBuilt();
  cluster = await startPostgres();
}, 90_000);
afterAll(async () => {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
  await cluster?.stop();
}, 60_000);

beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-pg-'));
  chmodSync(dir, 0o700);
  databases += 1;
  const url = new URL(await cluster.createDatabase(`serve_${process.pid}_${databases}`));
  url.password = '';
  const passwordFile = join(dir, 'db.password');
  writeFileSync(passwordFile, `${cluster.password}\n`, { mode: 0o600 });
  chmodSync(passwordFile, 0o600);
  env = {
    ...cliEnv(dir, standIn),
    ODUFLOW_STORE: url.toString(),
    ODUFLOW_STORE_PASSWORD_FILE: passwordFile,
    ODUFLOW_TOKENS_FILE: writeTokensFile(dir, testTokensFile()),
    ODUFLOW_POLL_WALK_INTERVAL_MS: '200',
    // Generous: the machine may be loaded, and no test here waits for a deadline to pass.
    ODUFLOW_CALL_TIMEOUT_MS: '10000',
  };
});
afterEach(async () => {
  for (const p of running.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await p.exited;
  }
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

function serve(args: readonly string[] = []): ServeProcess {
  const p = spawnServe(env, args);
  running.push(p);
  return p;
}

async function admit(address: string, key: string, minionId: string): Promise<ProtocolRequestRecord> {
  const response = await fetch(`${address}/v1/requests`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ minion_id: minionId, profile: 'configure' }),
  });
  expect(response.status).toBe(202);
  return (await response.json()) as ProtocolRequestRecord;
}

async function state(address: string, requestId: string): Promise<string> {
  const response = await fetch(`${address}/v1/requests/${requestId}`, { headers: { authorization: `Bearer ${TOKENS.acmeRead}` } });
  return ((await response.json()) as ProtocolRequestRecord).state;
}

describe('serve on PostgreSQL', () => {
  it('needs migrate first, then serves two instances on one database, each request published once', async () => {
    const early = serve();
    expect((await early.exited).code).toBe(EXIT.refused);
    expect(early.stderr()).toContain('store_format');

    const migrated = await runCli(['migrate', '--json'], env);
    expect(migrated.code).toBe(EXIT.ok);
    expect(jsonOf(migrated)).toMatchObject({ outcome: 'migrated' });
    expect(jsonOf(await runCli(['migrate', '--json'], env))).toMatchObject({ outcome: 'current' });

    const one = serve();
    const two = serve();
    const [a, b] = await Promise.all([one.address, two.address]);
    const first = await admit(a, 'pg-key-1', ACME_A);
    const second = await admit(b, 'pg-key-2', ACME_B);
    // The same key through the other instance is the same request.
    const replay = await fetch(`${b}/v1/requests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': 'pg-key-1', 'content-type': 'application/json' },
      body: JSON.stringify({ minion_id: ACME_A, profile: 'configure' }),
    });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(((await replay.json()) as ProtocolRequestRecord).request_id).toBe(first.request_id);

    for (const r of [first, second]) await waitFor(async () => (await state(a, r.request_id)) === 'succeeded', 15_000, `${r.request_id} succeeded`);
    expect(standIn.publicationsOf(first.request_id)).toBe(1);
    expect(standIn.publicationsOf(second.request_id)).toBe(1);

    // The CLI reads the same database; the location it shows has no password.
    const listed = await runCli(['list', '--json'], env);
    expect(jsonOf(listed)['records']).toHaveLength(2);
    expect(one.stderr() + two.stderr() + listed.stdout + listed.stderr).not.toContain(cluster.password);

    one.child.kill('SIGTERM');
    two.child.kill('SIGTERM');
    expect((await one.exited).code).toBe(EXIT.ok);
    expect((await two.exited).code).toBe(EXIT.ok);
  });
});
