import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresCluster } from '../src/postgres.js';

describe('a throwaway PostgreSQL cluster', () => {
  let pg: PostgresCluster;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 90_000);
  afterAll(async () => {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed
    await pg?.stop();
  }, 60_000);

  it('answers SQL on 127.0.0.1 with the durability defaults production gets', async () => {
    expect(pg.url).toMatch(/^postgres:\/\/oduflow:[^@]+@127\.0\.0\.1:\d+\/oduflow$/);
    expect((await pg.psql('SHOW fsync', pg.database)).trim()).toBe('on');
    expect((await pg.psql('SHOW synchronous_commit', pg.database)).trim()).toBe('on');
    expect((await pg.psql('SHOW listen_addresses')).trim()).toBe('127.0.0.1');
  });

  it('runs its server processes as an unprivileged user, never as root', async () => {
    const { readFileSync } = await import('node:fs');
    const serverPid = Number((await pg.psql('SELECT pg_backend_pid()')).trim());
    const realUid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${serverPid}/status`, 'utf8'))?.[1];
    expect(Number(realUid)).toBeGreaterThan(0);
  });

  it('refuses a wrong password', async () => {
    const wrong = pg.url.replace(pg.password, 'not-the-password');
    const { spawnSync } = await import('node:child_process');
    const attempt = spawnSync('/usr/bin/psql', [wrong, '-X', '-c', 'SELECT 1'], { encoding: 'utf8' });
    expect(attempt.status).not.toBe(0);
    expect(attempt.stderr).toMatch(/password authentication failed/);
  });

  it('creates further databases on demand', async () => {
    const url = await pg.createDatabase('second_db');
    expect(url).toBe(pg.urlFor('second_db'));
    expect((await pg.psql('SELECT current_database()', 'second_db')).trim()).toBe('second_db');
  });
});
