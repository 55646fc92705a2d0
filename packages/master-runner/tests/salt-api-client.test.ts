import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MasterRunnerError } from '../src/errors.js';
import { createSaltApiClient } from '../src/salt-api-client.js';
import { GOOD_CAPABILITIES, refusedUrl, startSaltApiStandIn, type SaltApiStandIn } from './support/salt-api-standin.js';
import { MINION, REQUEST_A, scratchDir, writePasswordFile } from './support/harness.js';

const JID = '20261129100000000000';

let standIn: SaltApiStandIn;
let scratch: { dir: string; remove: () => void };
let passwordFile: string;

beforeEach(async () => {
  standIn = await startSaltApiStandIn();
  scratch = scratchDir();
  passwordFile = writePasswordFile(scratch.dir, standIn.password);
});
afterEach(async () => {
  await standIn.close();
  scratch.remove();
});

function client(overrides: { url?: string; timeoutMs?: number; passwordFile?: string; now?: () => number } = {}) {
  return createSaltApiClient({
    url: overrides.url ?? standIn.url,
    username: standIn.username,
    passwordFile: overrides.passwordFile ?? passwordFile,
    eauth: 'sharedsecret',
    timeoutMs: overrides.timeoutMs ?? 1_000,
    ...(overrides.now === undefined ? {} : { now: overrides.now }),
  });
}

/** A clock the test moves by hand. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let ms = Date.now();
  return { now: () => ms, advance: (by) => (ms += by) };
}

function creationError(fn: () => unknown): MasterRunnerError {
  try {
    fn();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected an error');
}

describe('publish', () => {
  it('sends local_async to exactly one minion with tgt_type list and our JID', async () => {
    const outcome = await client().publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', '']);
    expect(outcome).toEqual({ kind: 'acked' });
    expect(standIn.calls).toEqual([
      { client: 'local_async', fun: 'oduflow_job.run', tgt: [MINION], tgtType: 'list', args: [REQUEST_A, 'configure', ''] },
    ]);
    expect(standIn.publicationsUnder(JID)).toBe(1);
  });

  it('calls a lost acknowledgement uncertain, never unsent', async () => {
    standIn.publishMode = 'lost_ack';
    expect(await client().publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'uncertain',
      reason: 'connection_reset',
    });
    expect(standIn.publicationsUnder(JID)).toBe(1);
  });

  it('calls a publication that outlives its deadline uncertain', async () => {
    standIn.publishMode = 'hang';
    expect(await client({ timeoutMs: 300 }).publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'uncertain',
      reason: 'timeout',
    });
  });

  it('calls a 500 answer uncertain', async () => {
    standIn.publishMode = 'error_500';
    expect(await client().publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'uncertain',
      reason: 'server_error',
    });
  });

  it('calls an answer without a matching minion uncertain', async () => {
    standIn.publishMode = 'no_match';
    expect(await client().publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'uncertain',
      reason: 'no_matching_minion',
    });
  });

  it('calls a refused connection provably not sent', async () => {
    const outcome = await client({ url: await refusedUrl() }).publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', '']);
    expect(outcome).toEqual({ kind: 'not_sent', reason: 'connection_refused' });
  });

  it('calls a publication not sent when salt-api refuses the credentials', async () => {
    const wrong = writePasswordFile(join(scratch.dir), 'wrong-password', 0o400);
    const outcome = await client({ passwordFile: wrong }).publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', '']);
    expect(outcome).toEqual({ kind: 'not_sent', reason: 'auth_failed' });
    expect(standIn.publications).toHaveLength(0);
  });
});

describe('tokens', () => {
  it('logs in once and reuses the token', async () => {
    const salt = client();
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    expect(standIn.logins).toBe(1);
  });

  it('renews the token after a 401 on an idempotent call and asks again', async () => {
    const salt = client();
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    standIn.dropTokens();
    expect(await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000)).toEqual({ kind: 'returned', retcode: 0, ret: GOOD_CAPABILITIES });
    expect(standIn.logins).toBe(2);
  });

  it('never sends a publication twice: a 401 to it is uncertain, not retried', async () => {
    const salt = client();
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    standIn.dropTokens();
    expect(await salt.publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'uncertain',
      reason: 'unauthorized',
    });
    expect(standIn.publicationRequests).toBe(1);
    expect(standIn.logins).toBe(1);
    // The rejected session is forgotten: the next request logs in first.
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    expect(standIn.logins).toBe(2);
  });

  it('logs in before publishing when the token has expired on the injected clock', async () => {
    await standIn.close();
    standIn = await startSaltApiStandIn({ tokenLifeS: 3600 });
    passwordFile = writePasswordFile(scratch.dir, standIn.password, 0o600);
    const clock = manualClock();
    const salt = client({ now: clock.now });
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    expect(standIn.logins).toBe(1);
    clock.advance(3600_000);
    expect(await salt.publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({ kind: 'acked' });
    expect(standIn.logins).toBe(2);
    expect(standIn.publicationRequests).toBe(1);
  });

  it('calls a publication not sent when the login before it is refused, sending nothing', async () => {
    const clock = manualClock();
    const salt = client({ now: clock.now });
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    clock.advance(13 * 3600_000);
    standIn.loginReply = () => ({ status: 401, body: '{"status":401}' });
    expect(await salt.publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'not_sent',
      reason: 'auth_failed',
    });
    expect(standIn.publicationRequests).toBe(0);
  });

  it('calls a publication not sent when salt-api refuses the connection for the login before it', async () => {
    const clock = manualClock();
    const salt = client({ now: clock.now });
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    clock.advance(13 * 3600_000);
    await standIn.close();
    expect(await salt.publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({
      kind: 'not_sent',
      reason: 'connection_refused',
    });
    expect(standIn.publicationRequests).toBe(0);
    standIn = await startSaltApiStandIn();
  });

  it('renews a token that is about to expire before using it', async () => {
    await standIn.close();
    standIn = await startSaltApiStandIn({ tokenLifeS: 30 });
    passwordFile = writePasswordFile(scratch.dir, standIn.password, 0o600);
    const salt = client();
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    expect(standIn.logins).toBe(2);
  });
});

describe('checkLogin', () => {
  it('logs in afresh each time and says salt-api accepted it', async () => {
    const salt = client();
    expect(await salt.checkLogin(1_000)).toEqual({ ok: true });
    expect(await salt.checkLogin(1_000)).toEqual({ ok: true });
    expect(standIn.logins).toBe(2);
  });

  it('says why when salt-api refuses the login or cannot be reached', async () => {
    standIn.loginReply = () => ({ status: 401, body: '{"status":401}' });
    expect(await client().checkLogin(1_000)).toEqual({ ok: false, reason: 'auth_failed' });
    expect(await client({ url: await refusedUrl() }).checkLogin(1_000)).toEqual({ ok: false, reason: 'connection_refused' });
  });
});

describe('call', () => {
  it('asks with local, full_return and Salt timeouts that end well inside its own deadline', async () => {
    const outcome = await client().call(MINION, 'oduflow_job.capabilities', [], 20_000);
    expect(outcome).toEqual({ kind: 'returned', retcode: 0, ret: GOOD_CAPABILITIES });
    expect(standIn.calls[0]).toMatchObject({ client: 'local', tgt: [MINION], tgtType: 'list' });
    // A stopped minion costs timeout + gather_job_timeout in Salt: both must fit in the 20 s.
    expect(standIn.lowstates[0]).toMatchObject({ full_return: true, timeout: 12, gather_job_timeout: 4 });
  });

  it('reports a minion that did not answer, and a target Salt does not know', async () => {
    standIn.capabilities = () => ({ noReturn: true });
    expect(await client().call(MINION, 'oduflow_job.capabilities', [], 1_000)).toEqual({ kind: 'no_return' });
    standIn.capabilities = () => ({ noTarget: true });
    expect(await client().call(MINION, 'oduflow_job.capabilities', [], 1_000)).toEqual({ kind: 'no_target' });
  });

  it('enforces its own deadline when salt-api keeps the call open', async () => {
    standIn.capabilities = () => ({ hang: true });
    expect(await client().call(MINION, 'oduflow_job.capabilities', [], 300)).toEqual({ kind: 'failed', reason: 'timeout', sent: true });
  });

  it('reports a body that is not salt-api JSON as malformed', async () => {
    standIn.capabilities = () => ({ body: '<html>oops</html>' });
    expect(await client().call(MINION, 'oduflow_job.capabilities', [], 1_000)).toEqual({
      kind: 'failed',
      reason: 'malformed_response',
      sent: true,
    });
  });
});

describe('configuration and credentials', () => {
  it('refuses a password file readable by others, naming the rule and not the password', () => {
    const loose = writePasswordFile(scratch.dir, standIn.password, 0o644);
    const error = creationError(() => client({ passwordFile: loose }));
    expect(error.code).toBe('credentials_insecure');
    expect(error.message).toContain('mode 644');
    expect(error.message).not.toContain(standIn.password);
  });

  it('refuses a password file that is a symlink', () => {
    const link = join(scratch.dir, 'password-link');
    symlinkSync(passwordFile, link);
    expect(creationError(() => client({ passwordFile: link })).code).toBe('credentials_insecure');
  });

  it('reports a missing password file as unreadable', () => {
    expect(creationError(() => client({ passwordFile: join(scratch.dir, 'absent') })).code).toBe('credentials_unreadable');
  });

  it('refuses a URL with credentials or another scheme', () => {
    expect(creationError(() => client({ url: 'http://user:pw@127.0.0.1:1' })).code).toBe('config_invalid');
    expect(creationError(() => client({ url: 'ftp://127.0.0.1' })).code).toBe('config_invalid');
  });
});

describe('concurrency', () => {
  /** A salt-api that holds every answer 40 ms and records which exchanges overlapped. */
  async function observedServer() {
    const { createServer } = await import('node:http');
    const seen = { reads: 0, publications: 0, maxReads: 0, publicationOverlaps: 0, logins: 0 };
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        const publication = body.includes('"local_async"');
        if (publication) seen.publications += 1;
        else seen.reads += 1;
        seen.maxReads = Math.max(seen.maxReads, seen.reads);
        if (seen.publications > 1 || (seen.publications === 1 && seen.reads > 0)) seen.publicationOverlaps += 1;
        if (req.url === '/login') seen.logins += 1;
        const answer =
          req.url === '/login'
            ? { return: [{ token: 'c0ffee', expire: Date.now() / 1000 + 3600, start: Date.now() / 1000 }] }
            : publication
              ? { return: [{ jid: (JSON.parse(body) as { jid: string }[])[0]?.jid, minions: [MINION] }] }
              : { return: [{ [MINION]: { ret: GOOD_CAPABILITIES, retcode: 0 } }] };
        setTimeout(() => {
          if (publication) seen.publications -= 1;
          else seen.reads -= 1;
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
        }, 40);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return { url: `http://127.0.0.1:${address.port}`, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }

  it('runs status calls in parallel, up to its limit, sharing one login', async () => {
    const server = await observedServer();
    try {
      const salt = createSaltApiClient({ url: server.url, username: standIn.username, passwordFile, eauth: 'sharedsecret', maxConcurrentCalls: 4 });
      const answers = await Promise.all(Array.from({ length: 10 }, () => salt.call(MINION, 'oduflow_job.capabilities', [], 5_000)));
      expect(answers.every((a) => a.kind === 'returned')).toBe(true);
      expect(server.seen.maxReads).toBe(4);
      expect(server.seen.logins).toBe(1);
      salt.close();
    } finally {
      await server.close();
    }
  });

  it('never has a publication in flight beside any other exchange, so salt-api 3006.27 cannot race it on its .root_key', async () => {
    const server = await observedServer();
    try {
      const salt = createSaltApiClient({ url: server.url, username: standIn.username, passwordFile, eauth: 'sharedsecret', timeoutMs: 5_000 });
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          i % 3 === 1
            ? salt.publish(MINION, `2026112910000000000${i % 10}`, 'oduflow_job.run', [REQUEST_A, 'configure', ''])
            : salt.call(MINION, 'oduflow_job.capabilities', [], 5_000),
        ),
      );
      expect(answers.filter((a) => a.kind === 'acked')).toHaveLength(4);
      expect(server.seen.maxReads).toBeGreaterThan(1);
      expect(server.seen.publicationOverlaps).toBe(0);
      salt.close();
    } finally {
      await server.close();
    }
  });

  it('renews a refused token once for many calls that were refused together', async () => {
    const salt = client();
    await salt.call(MINION, 'oduflow_job.capabilities', [], 1_000);
    standIn.dropTokens();
    const answers = await Promise.all(Array.from({ length: 8 }, () => salt.call(MINION, 'oduflow_job.capabilities', [], 1_000)));
    expect(answers.every((a) => a.kind === 'returned')).toBe(true);
    expect(standIn.logins).toBe(2);
    salt.close();
  });

  it('does not retry a publication that salt-api answered 500: it stays uncertain, sent once', async () => {
    standIn.publishMode = 'error_500';
    expect(await client().publish(MINION, JID, 'oduflow_job.run', [REQUEST_A, 'configure', ''])).toEqual({ kind: 'uncertain', reason: 'server_error' });
    expect(standIn.publicationRequests).toBe(1);
  });

  it('answers a batch of calls in order, each from its own minion', async () => {
    const other = 'client-5d6e7f80-9a0b-4c1d-8e2f-3a4b5c6d7e8f';
    standIn.capabilities = (id) => (id === other ? { noReturn: true } : { retcode: 0, ret: GOOD_CAPABILITIES });
    const salt = client();
    const answers = await salt.callMany?.(
      [
        { minionId: MINION, fun: 'oduflow_job.status', args: [REQUEST_A, JID, 'configure', ''] },
        { minionId: other, fun: 'oduflow_job.status', args: [REQUEST_A, JID, 'configure', ''] },
      ],
      1_000,
    );
    expect(answers?.map((a) => a.kind)).toEqual(['returned', 'returned']);
    expect(standIn.batches).toBe(1);
    expect(standIn.calls.map((c) => c.tgt)).toEqual([[MINION], [other]]);
  });
});
