import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { EXIT } from '../src/exit-codes.js';
import { assertBuilt, cliEnv, jsonOf, runCli } from './support/cli.js';

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const REQUEST = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';

let standIn: SaltApiStandIn;
let dir: string;
let store: string;
let env: Record<string, string>;

beforeAll(() => assertBuilt());
beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  dir = mkdtempSync(join(tmpdir(), 'oduflow-migrate-'));
  chmodSync(dir, 0o700);
  store = join(dir, 'store');
  env = cliEnv(dir, standIn);
});
afterEach(async () => {
  await standIn.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A store as a release before the format marker left it: a published request and a legacy one, records and JIDs only. */
function olderStore(): void {
  for (const sub of ['', 'requests', 'jids', 'locks']) mkdirSync(join(store, sub), { mode: 0o700 });
  const write = (path: string, value: unknown): void => writeFileSync(join(store, path), JSON.stringify(value), { mode: 0o600 });
  write(`requests/old-7.json`, { minion_id: MINION, state: 'sent' });
  write('requests/old-8.json', { status: 'sent' });
}

describe('oduflow-master migrate-store', () => {
  it('is what every command asks for on an older store, and afterwards they work (exit 2, then 0)', async () => {
    olderStore();
    for (const args of [['list', '--json'], ['preflight', '--json'], ['dispatch', '--minion', MINION, '--profile', 'configure', '--json']]) {
      const refused = await runCli(args, env);
      expect(refused.code).toBe(EXIT.refused);
      const error = (jsonOf(refused)['error'] ?? {}) as Record<string, unknown>;
      expect(error).toMatchObject({ code: 'store_format', detail: 'needs_migration' });
      expect(error['message']).toContain('oduflow-master migrate-store');
    }
    expect(standIn.publications).toHaveLength(0);

    const migrated = await runCli(['migrate-store', '--json'], env);
    expect(migrated.code).toBe(EXIT.ok);
    expect(jsonOf(migrated)).toEqual({
      outcome: 'migrated',
      store,
      wasCurrent: false,
      records: 2,
      undecodable: 0,
      unresolved: 2,
      historyEntriesWritten: 2,
      unresolvedEntriesWritten: 2,
      staleEntriesRemoved: 0,
    });
    expect(readdirSync(store)).toContain('format.json');

    const preflight = await runCli(['preflight', '--json'], env);
    expect(preflight.code).toBe(EXIT.unresolved);
    expect(jsonOf(preflight)).toMatchObject({ clean: false, legacy: 2 });
    expect(jsonOf(await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--json'], env))).toMatchObject({ error: { code: 'target_blocked' } });

    const again = await runCli(['migrate-store'], env);
    expect(again.code).toBe(EXIT.ok);
    expect(again.stdout).toContain('was current');
    expect(again.stdout).toContain('rechecked');
  });

  it('creates no store where there is none (exit 2, not_found)', async () => {
    const run = await runCli(['migrate-store', '--json'], env);
    expect(run.code).toBe(EXIT.refused);
    expect(jsonOf(run)).toMatchObject({ error: { code: 'not_found', detail: 'no_store' } });
    expect(existsSync(store)).toBe(false);
  });

  it('needs no step for a new store', async () => {
    const run = await runCli(['dispatch', '--minion', MINION, '--profile', 'configure', '--request-id', REQUEST, '--json'], env);
    expect(run.code).toBe(EXIT.ok);
    expect(jsonOf(await runCli(['list', '--unresolved', '--json'], env))).toMatchObject({ records: [{ request_id: REQUEST, state: 'published' }] });
  });
});
