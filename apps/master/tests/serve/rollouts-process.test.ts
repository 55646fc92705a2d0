import { readRollout, type RolloutReport } from '@oduflow/master-runner';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../../src/exit-codes.js';
import { rolloutIdOfKey } from '../../src/serve/rollout-id.js';
import { assertBuilt, cliEnv } from '../support/cli.js';
import { buildCrashCli, removeCrashCli } from '../support/crash-entry.js';
import { FLEET, fleetTokensFile, publicationsPerMinion, statusFor } from './support/rollout-fleet.js';
import { spawnServe, writeTokensFile, type ServeProcess } from './support/serve-process.js';
import { TOKENS, waitFor } from './support/service-world.js';

/*
 * Rollouts in the built executable: `oduflow-master serve` in a real
 * process over a file store and the salt-api stand-in of this test process
 * (which counts every publication per minion), stopped with a real SIGTERM
 * or killed with a real SIGKILL in the middle of a rollout, then started
 * again on the same store and rollout workspace (the default one, beside
 * the store directory).
 */

let ROLLOUT_CLI: string;
let standIn: SaltApiStandIn;
let dir: string;
let env: Record<string, string>;
const running: ServeProcess[] = [];
const TARGETS = FLEET.slice(0, 30);

beforeAll(async () => {
  assertBuilt();
  ROLLOUT_CLI = await buildCrashCli('rollout-cli');
}, 60_000);
afterAll(() => removeCrashCli(ROLLOUT_CLI));
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-rollout-'));
  chmodSync(dir, 0o700);
  env = {
    ...cliEnv(dir, standIn),
    ODUFLOW_TOKENS_FILE: writeTokensFile(dir, fleetTokensFile()),
    ODUFLOW_POLL_WALK_INTERVAL_MS: '200',
    ODUFLOW_CALL_TIMEOUT_MS: '10000',
    ODUFLOW_ROLLOUT_POLL_INTERVAL_MS: '50',
    // The poller and the rollout must find results by polling: returns on the event stream would settle them without it.
    ODUFLOW_EVENT_STREAM: 'off',
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

function serve(entry?: { readonly path: string; readonly args: readonly string[] }): ServeProcess {
  const p = entry === undefined ? spawnServe(env) : spawnServe(env, [], entry.path, entry.args);
  running.push(p);
  return p;
}

function startRollout(address: string, key: string): Promise<Response> {
  return fetch(`${address}/v1/rollouts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKENS.acmeAll}`, 'idempotency-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ profile: 'configure', targets: TARGETS, batch_size: 10 }),
  });
}

async function shown(address: string, id: string): Promise<RolloutReport> {
  const response = await fetch(`${address}/v1/rollouts/${id}`, { headers: { authorization: `Bearer ${TOKENS.acmeRead}` } });
  expect(response.status).toBe(200);
  return (await response.json()) as RolloutReport;
}

/** The rollout as its checkpoints say, read from the default workspace (rollouts/ beside the store) while no service runs. */
function onDisk(id: string, runId: string = id): RolloutReport {
  return readRollout(join(dir, 'rollouts', 'http', 'acme', id, 'job'), runId);
}

function expectOnePublicationPerTarget(): void {
  const perMinion = publicationsPerMinion(standIn.publications);
  expect([...perMinion.keys()].sort()).toEqual(TARGETS);
  expect(new Set(perMinion.values())).toEqual(new Set([1]));
}

async function finishedOn(address: string, id: string): Promise<RolloutReport> {
  let last: RolloutReport | undefined;
  await waitFor(async () => (last = await shown(address, id)).status === 'succeeded', 30_000, 'the rollout finished');
  return last as RolloutReport;
}

describe('a rollout in a serve process that stops in the middle of it', () => {
  it('is left resumable by SIGTERM at once, and a restarted service finishes it without publishing to any target twice', async () => {
    let holdBatch2 = true;
    const batch2 = new Set(TARGETS.slice(10, 20));
    standIn.status = statusFor((minion) => (holdBatch2 && batch2.has(minion) ? 'running' : undefined));

    const first = serve();
    const address = await first.address;
    const response = await startRollout(address, 'sigterm-rollout');
    expect(response.status).toBe(202);
    const id = ((await response.json()) as RolloutReport).rollout_id;
    await waitFor(async () => {
      const now = await shown(address, id);
      return now.stages[1]?.status === 'running' && now.counts.pending === 10 && standIn.publications.length === 20;
    }, 30_000, 'the second batch was dispatched and is being polled');

    const signalled = Date.now();
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: EXIT.ok, signal: null });
    // The batch's deadline is 15 minutes away: the shutdown did not wait for it.
    expect(Date.now() - signalled).toBeLessThan(10_000);
    expect(first.lines().map((l) => l['msg'])).toContain('rollout stopped by the shutdown at its last checkpoint; the next start resumes it');
    const left = onDisk(id);
    expect(left).toMatchObject({ status: 'interrupted', finished_at: null });
    expect(left.stages.map((s) => s.status)).toEqual(['succeeded', 'running', 'pending']);
    expect(standIn.publications).toHaveLength(20);

    holdBatch2 = false;
    const second = serve();
    const again = await second.address;
    const resumed = await second.logged('rollout resumed after a restart', 30_000);
    expect(resumed).toMatchObject({ rollout: id, resumed_from: id });
    const done = await finishedOn(again, id);
    expect(done).toMatchObject({ status: 'succeeded', rollout_id: id, resumed_from: id, halted: null });
    expect(done.run_id).not.toBe(id);
    expect(done.counts).toMatchObject({ succeeded: 30, pending: 0, not_reached: 0 });
    expectOnePublicationPerTarget();

    const metrics = await (await fetch(`${again}/metrics`)).text();
    expect(metrics).toContain('oduflow_rollouts_started_total{origin="resume"} 1');
    expect(metrics).toContain('oduflow_rollouts_finished_total{status="succeeded"} 1');
    // The same key still names the rollout, across the restart.
    const replay = await startRollout(again, 'sigterm-rollout');
    expect(replay.status).toBe(202);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: EXIT.ok, signal: null });
  });

  it('is resumed after a SIGKILL right after a batch checkpoint, and finishes without publishing to any target twice', async () => {
    const crashing = serve({ path: ROLLOUT_CLI, args: ['kill:after_stage:1'] });
    const address = await crashing.address;
    // The answer may or may not leave before the kill: the key names the rollout either way.
    await startRollout(address, 'sigkill-rollout').catch(() => undefined);
    expect(await crashing.exited).toEqual({ code: null, signal: 'SIGKILL' });
    const id = rolloutIdOfKey({ tenant: 'acme', actor: 'acme-ops', key: 'sigkill-rollout' });
    const left = onDisk(id);
    expect(left.status).toBe('interrupted');
    expect(left.stages.map((s) => s.status)).toEqual(['succeeded', 'succeeded', 'pending']);
    expect(standIn.publications).toHaveLength(20);

    const restarted = serve();
    const again = await restarted.address;
    const done = await finishedOn(again, id);
    expect(done).toMatchObject({ status: 'succeeded', resumed_from: id });
    expect(done.counts.succeeded).toBe(30);
    expectOnePublicationPerTarget();
  });
});
