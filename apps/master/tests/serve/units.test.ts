import { MasterRunnerError } from '@oduflow/master-runner';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { storeConfig } from '../../src/config.js';
import { main } from '../../src/main.js';
import { EXIT } from '../../src/exit-codes.js';
import { decodeCursor, encodeCursor } from '../../src/serve/cursor.js';
import { parseIdempotencyKey } from '../../src/serve/idempotency-key.js';
import { serveConfig } from '../../src/serve/serve-config.js';
import { saltReadiness } from '../../src/serve/service.js';
import { loadTokensFile, tokenDigest, tokenRegistry } from '../../src/serve/tokens.js';
import { ACME_A, ACME_B, GLOBEX_A, TOKENS, testTokensFile } from './support/service-world.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-units-'));
  chmodSync(dir, 0o700);
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function refusal(fn: () => unknown): MasterRunnerError {
  try {
    fn();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('parseIdempotencyKey', () => {
  it.each([
    ['a bare token', 'order-42', 'order-42'],
    ['an sf-string', '"order 42"', 'order 42'],
    ['an sf-string with escapes', '"a\\"b\\\\c"', 'a"b\\c'],
    ['surrounding whitespace', '  k1  ', 'k1'],
    ['255 characters', 'x'.repeat(255), 'x'.repeat(255)],
  ])('accepts %s', (_label, header, key) => {
    expect(parseIdempotencyKey(header)).toEqual({ ok: true, key });
  });

  it.each([
    ['missing', undefined, 'missing'],
    ['empty', '', 'empty'],
    ['an empty sf-string', '""', 'empty'],
    ['256 characters', 'x'.repeat(256), 'too_long'],
    ['a repeated header', ['a', 'b'], 'malformed'],
    ['a bare value with a space', 'a b', 'malformed'],
    ['a non-ASCII character', 'clé', 'malformed'],
    ['a control character inside quotes', '"a\u0001b"', 'malformed'],
    ['an unknown escape', '"a\\tb"', 'malformed'],
    ['text after the closing quote', '"a"b', 'malformed'],
    ['no closing quote', '"abc', 'malformed'],
  ])('refuses %s', (_label, header, why) => {
    expect(parseIdempotencyKey(header)).toEqual({ ok: false, why });
  });
});

describe('the tokens file', () => {
  const registry = tokenRegistry(testTokensFile(), '/t');

  it('authenticates a listed token to its tenant, actor and scopes, and nothing else', () => {
    expect(registry.authenticate(`Bearer ${TOKENS.acmeDispatch}`)).toEqual({
      tokenId: 'acme-dispatch',
      tenant: 'acme',
      actor: 'acme-ci',
      scopes: new Set(['read', 'dispatch']),
    });
    expect(registry.authenticate(`bearer ${TOKENS.acmeDispatch}`)?.tokenId).toBe('acme-dispatch');
    for (const header of [undefined, '', TOKENS.acmeDispatch, `Bearer ${TOKENS.acmeDispatch}x`, `Basic ${TOKENS.acmeDispatch}`, `Bearer a b`]) {
      expect(registry.authenticate(header)).toBeUndefined();
    }
  });

  it('knows which tenant owns each target, and owns nothing for the rest', () => {
    expect(registry.ownerOf(ACME_A)).toBe('acme');
    expect(registry.ownerOf(GLOBEX_A)).toBe('globex');
    expect(registry.ownerOf('client-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d')).toBeUndefined();
    expect(registry.minionsOf('acme')).toEqual([ACME_A, ACME_B].sort());
    expect(registry.minionsOf('nobody')).toEqual([]);
  });

  it.each([
    ['a target under two tenants', { tenants: { a: { minions: [ACME_A] }, b: { minions: [ACME_A] } }, tokens: [] }, 'belongs to one tenant'],
    [
      'a token of an unknown tenant',
      { tenants: { a: { minions: [] } }, tokens: [{ id: 't', sha256: tokenDigest('x'), tenant: 'b', actor: 'ci', scopes: ['read'] }] },
      'not under "tenants"',
    ],
    [
      'two tokens with one id',
      {
        tenants: { a: { minions: [] } },
        tokens: [
          { id: 't', sha256: tokenDigest('x'), tenant: 'a', actor: 'ci', scopes: ['read'] },
          { id: 't', sha256: tokenDigest('y'), tenant: 'a', actor: 'ci', scopes: ['read'] },
        ],
      },
      'listed twice',
    ],
    ['an unknown scope', { tenants: { a: { minions: [] } }, tokens: [{ id: 't', sha256: tokenDigest('x'), tenant: 'a', actor: 'ci', scopes: ['admin'] }] }, 'tokens.0.scopes.0'],
    ['a raw token instead of its digest', { tenants: { a: { minions: [] } }, tokens: [{ id: 't', sha256: 'odf_secret-raw-token', tenant: 'a', actor: 'ci', scopes: ['read'] }] }, 'tokens.0.sha256'],
    ['an actor reconcile would refuse', { tenants: { a: { minions: [] } }, tokens: [{ id: 't', sha256: tokenDigest('x'), tenant: 'a', actor: 'two words', scopes: ['read'] }] }, 'tokens.0.actor'],
    ['a malformed minion id', { tenants: { a: { minions: ['web-01'] } }, tokens: [] }, 'tenants.a.minions.0'],
  ])('refuses %s, naming where and never the value', (_label, file, where) => {
    const error = refusal(() => tokenRegistry(file, '/etc/oduflow/tokens.json'));
    expect(error.code).toBe('config_invalid');
    expect(error.message).toContain(where);
    expect(error.message).not.toContain('odf_secret-raw-token');
  });

  it('is read only from a private regular file of this user', () => {
    const path = join(dir, 'tokens.json');
    writeFileSync(path, JSON.stringify(testTokensFile()), { mode: 0o600 });
    chmodSync(path, 0o600);
    expect(loadTokensFile(path).tokenCount).toBe(5);
    chmodSync(path, 0o640);
    expect(refusal(() => loadTokensFile(path))).toMatchObject({ code: 'credentials_insecure' });
    chmodSync(path, 0o600);
    const link = join(dir, 'link.json');
    symlinkSync(path, link);
    expect(refusal(() => loadTokensFile(link))).toMatchObject({ code: 'credentials_insecure' });
    writeFileSync(path, '{not json');
    expect(refusal(() => loadTokensFile(path)).message).toContain('is not JSON');
    expect(refusal(() => loadTokensFile('relative.json'))).toMatchObject({ code: 'config_invalid' });
  });
});

describe('serve configuration', () => {
  const env = { ODUFLOW_TOKENS_FILE: '/etc/oduflow/tokens.json' };

  it('has defaults for everything but the tokens file', () => {
    expect(serveConfig({}, env)).toEqual({
      host: '127.0.0.1',
      port: 8470,
      tokensFile: '/etc/oduflow/tokens.json',
      keyRetentionMs: 24 * 3_600_000,
      acceptLegacy: false,
      relayConcurrency: 4,
      relayLeaseMs: 120_000,
      pollConcurrency: 64,
      pollWalkEveryMs: 30_000,
      eventStream: true,
    });
    expect(refusal(() => serveConfig({}, {})).message).toContain('ODUFLOW_TOKENS_FILE');
  });

  it('takes every setting from the environment, flags first', () => {
    const config = serveConfig(
      { port: '9000' },
      {
        ...env,
        ODUFLOW_LISTEN_HOST: '0.0.0.0',
        ODUFLOW_LISTEN_PORT: '1',
        ODUFLOW_KEY_RETENTION_HOURS: '48',
        ODUFLOW_ACCEPT_LEGACY: 'true',
        ODUFLOW_RELAY_CONCURRENCY: '2',
        ODUFLOW_RELAY_LEASE_MS: '5000',
        ODUFLOW_POLL_CONCURRENCY: '16',
        ODUFLOW_POLL_WALK_INTERVAL_MS: '5000',
        ODUFLOW_EVENT_STREAM: 'off',
      },
    );
    expect(config).toMatchObject({ host: '0.0.0.0', port: 9000, keyRetentionMs: 48 * 3_600_000, acceptLegacy: true, relayConcurrency: 2, relayLeaseMs: 5000, pollConcurrency: 16, pollWalkEveryMs: 5000, eventStream: false });
  });

  it.each([
    ['a key retention under 24 hours', { ODUFLOW_KEY_RETENTION_HOURS: '23' }],
    ['a port out of range', { ODUFLOW_LISTEN_PORT: '65536' }],
    ['a concurrency of 0', { ODUFLOW_RELAY_CONCURRENCY: '0' }],
    ['a relay lease under a second', { ODUFLOW_RELAY_LEASE_MS: '999' }],
    ['an accept-legacy that is not a boolean', { ODUFLOW_ACCEPT_LEGACY: 'maybe' }],
    ['an event stream setting other than on/off', { ODUFLOW_EVENT_STREAM: 'sometimes' }],
  ])('refuses %s', (_label, extra) => {
    expect(refusal(() => serveConfig({}, { ...env, ...extra }))).toMatchObject({ code: 'config_invalid' });
  });

  it('selects the file store for a directory and PostgreSQL for a postgres:// URL', () => {
    expect(storeConfig({}, {})).toEqual({ kind: 'file', store: '/var/lib/oduflow/master' });
    expect(storeConfig({}, { ODUFLOW_STORE: '/srv/oduflow' })).toEqual({ kind: 'file', store: '/srv/oduflow' });
    expect(
      storeConfig({}, { ODUFLOW_STORE: 'postgres://oduflow@db:5432/oduflow', ODUFLOW_STORE_PASSWORD_FILE: '/etc/oduflow/db.password', ODUFLOW_STORE_POOL_SIZE: '20' }),
    ).toEqual({ kind: 'postgres', connectionString: 'postgres://oduflow@db:5432/oduflow', passwordFile: '/etc/oduflow/db.password', poolSize: 20 });
    expect(storeConfig({ store: 'postgresql://db/x' }, {})).toMatchObject({ kind: 'postgres' });
    expect(refusal(() => storeConfig({}, { ODUFLOW_STORE: '/srv/oduflow', ODUFLOW_STORE_POOL_SIZE: '5' }))).toMatchObject({ code: 'config_invalid' });
    expect(refusal(() => storeConfig({}, { ODUFLOW_STORE: 'postgres://db/x', ODUFLOW_STORE_POOL_SIZE: 'many' }))).toMatchObject({ code: 'config_invalid' });
  });
});

describe('page cursors', () => {
  it('round-trip a request id and refuse anything else', () => {
    const id = '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f';
    expect(decodeCursor(encodeCursor(id))).toBe(id);
    for (const cursor of ['', '!!!', encodeCursor('../etc'), `${encodeCursor(id)}=`]) expect(decodeCursor(cursor)).toBeUndefined();
  });
});

describe('oduflow-master token new', () => {
  async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const code = await main(argv, {}, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
    return { code, stdout, stderr };
  }

  it('prints a fresh token once and the entry that admits it, which authenticates it', async () => {
    const out = await run(['token', 'new', '--tenant', 'acme', '--actor', 'ci-bot', '--scope', 'read', 'dispatch', '--json']);
    expect(out.code).toBe(EXIT.ok);
    const { token, entry } = JSON.parse(out.stdout) as { token: string; entry: Record<string, unknown> };
    expect(token).toMatch(/^odf_[A-Za-z0-9_-]{43}$/);
    expect(entry).toEqual({ id: expect.stringMatching(/^acme-ci-bot-[0-9a-f]{6}$/) as unknown, sha256: tokenDigest(token), tenant: 'acme', actor: 'ci-bot', scopes: ['read', 'dispatch'] });
    const registry = tokenRegistry({ tenants: { acme: { minions: [] } }, tokens: [entry] }, '/t');
    expect(registry.authenticate(`Bearer ${token}`)?.scopes).toEqual(new Set(['read', 'dispatch']));
    const again = JSON.parse((await run(['token', 'new', '--tenant', 'acme', '--actor', 'ci-bot', '--scope', 'read', '--json'])).stdout) as { token: string };
    expect(again.token).not.toBe(token);
  });

  it('shows the token and the entry to people, and refuses an unknown scope or a bad tenant', async () => {
    const out = await run(['token', 'new', '--tenant', 'acme', '--actor', 'ops', '--scope', 'reconcile', '--id', 'acme-ops']);
    expect(out.code).toBe(EXIT.ok);
    expect(out.stdout).toMatch(/^token: odf_/);
    expect(out.stdout).toContain('"id":"acme-ops"');
    expect((await run(['token', 'new', '--tenant', 'acme', '--actor', 'ops', '--scope', 'admin'])).code).toBe(EXIT.refused);
    expect((await run(['token', 'new', '--tenant', 'Acme Corp', '--actor', 'ops', '--scope', 'read'])).code).toBe(EXIT.refused);
  });

  it('refuses migrate on a file store and migrate-store on a PostgreSQL one', async () => {
    const migrate = await run(['migrate', '--store', join(dir, 'store'), '--json']);
    expect(migrate.code).toBe(EXIT.refused);
    expect(migrate.stdout).toContain('migrate is for a postgres:// store');
    const migrateStore = await run(['migrate-store', '--store', 'postgres://oduflow@127.0.0.1:1/oduflow', '--json']);
    expect(migrateStore.code).toBe(EXIT.refused);
    expect(migrateStore.stdout).toContain('migrate-store is for a file store');
  });
});

describe('salt-api readiness', () => {
  it('answers within its bound while a login waits, then with the login result, asking again only after the cache time', async () => {
    let calls = 0;
    let finish: (answer: string) => void = () => undefined;
    const readiness = saltReadiness(
      () => {
        calls += 1;
        return new Promise<string>((resolve) => (finish = resolve));
      },
      60_000,
      20,
    );
    expect(await readiness()).toBe('checking');
    expect(await readiness()).toBe('checking');
    expect(calls).toBe(1);
    finish('auth_failed');
    await new Promise((resolve) => setImmediate(resolve));
    expect(await readiness()).toBe('auth_failed');
    expect(calls).toBe(1);
  });

  it('calls a check that throws failed', async () => {
    const readiness = saltReadiness(() => Promise.reject(new Error('boom')), 0, 1_000);
    expect(await readiness()).toBe('failed');
  });
});
