import { readPrivatePasswordFile } from './credentials.js';
import { MasterRunnerError } from './errors.js';
import { exchange, type HttpOutcome, type HttpResponse } from './http-request.js';
import type { CallOutcome, PublishOutcome, SaltClient, SaltFailureReason } from './salt-client.js';

/*
 * SaltClient over salt-api's rest_cherrypy (research/salt-internals.md §7–8):
 *   POST /login {username, password, eauth}  → token (body return[0].token, header X-Auth-Token)
 *   POST /  [{client:"local_async", tgt:[id], tgt_type:"list", fun, arg, jid}]  publication under our JID
 *   POST /  [{client:"local", tgt:[id], tgt_type:"list", fun, arg, timeout, full_return:true}]  synchronous call
 * `tgt_type: list` hits exactly the accepted key named, with no glob meaning.
 *
 * Token renewal: a token is renewed shortly before its `expire`, and once
 * after a 401. Retrying a publication after a 401 cannot duplicate it:
 * rest_cherrypy checks the session in a before-handler hook that answers 401
 * before any lowstate chunk runs, so a 401 proves the chunk was not executed.
 *
 * The password is read once, from a private file, and kept only in this
 * closure; neither it nor the token is ever put in an error, a log line or a
 * returned value.
 */

export interface SaltApiClientOptions {
  /** Base URL of rest_cherrypy, e.g. http://127.0.0.1:8000 */
  readonly url: string;
  readonly username: string;
  /** Absolute path of a private (0600, owned by the runner's user) file holding the password. */
  readonly passwordFile: string;
  /** Salt external auth backend. */
  readonly eauth?: string;
  /** Deadline of a login or publication exchange. */
  readonly timeoutMs?: number;
  /** Wall clock in ms, for token expiry. */
  readonly now?: () => number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
/** Renew this long before salt-api says the token expires. */
const RENEW_BEFORE_EXPIRY_MS = 60_000;
/** When salt-api omits `expire`, assume a short life rather than Salt's 12 h default. */
const ASSUMED_TOKEN_LIFE_MS = 10 * 60_000;
const EAUTH = /^[a-z][a-z0-9_]{0,31}$/;

interface Token {
  readonly value: string;
  readonly renewAtMs: number;
}

type Authorized = { readonly ok: true; readonly response: HttpResponse } | { readonly ok: false; readonly sent: boolean; readonly reason: SaltFailureReason };

function parseBaseUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new MasterRunnerError('config_invalid', 'the salt-api URL is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new MasterRunnerError('config_invalid', 'the salt-api URL must use http or https');
  }
  if (url.username !== '' || url.password !== '') {
    // Credentials in a URL end up in logs and process listings.
    throw new MasterRunnerError('config_invalid', 'the salt-api URL must not carry credentials; use the password file');
  }
  // Endpoints resolve relative to the base, so salt-api may sit under a path prefix.
  if (!url.pathname.endsWith('/')) url.pathname = `${url.pathname}/`;
  return url;
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The single element of rest_cherrypy's `{"return": [x]}` envelope. */
function firstReturn(body: string): unknown {
  const parsed = parseJson(body);
  if (!isRecord(parsed) || !Array.isArray(parsed['return']) || parsed['return'].length !== 1) return undefined;
  return parsed['return'][0];
}

export function createSaltApiClient(options: SaltApiClientOptions): SaltClient {
  const base = parseBaseUrl(options.url);
  if (typeof options.username !== 'string' || options.username === '' || options.username.length > 256) {
    throw new MasterRunnerError('config_invalid', 'the salt-api user name is missing or too long');
  }
  const eauth = options.eauth ?? 'pam';
  if (!EAUTH.test(eauth)) throw new MasterRunnerError('config_invalid', 'the salt-api eauth backend name is malformed');
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) throw new MasterRunnerError('config_invalid', 'the salt-api timeout must be a positive integer');
  const password = readPrivatePasswordFile(options.passwordFile);
  const now = options.now ?? Date.now;
  const username = options.username;
  let token: Token | undefined;

  const endpoint = (path: string): URL => new URL(path, base);

  async function login(deadlineMs: number): Promise<{ ok: true } | { ok: false; reason: SaltFailureReason }> {
    const outcome = await exchange(endpoint('login'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ username, password, eauth }),
      deadlineMs,
    });
    if (!outcome.ok) return { ok: false, reason: outcome.reason };
    const { status, headers, body } = outcome.response;
    if (status === 401 || status === 403) return { ok: false, reason: 'auth_failed' };
    if (status >= 500) return { ok: false, reason: 'server_error' };
    if (status !== 200) return { ok: false, reason: 'http_error' };
    const answer = firstReturn(body);
    const fromBody = isRecord(answer) && typeof answer['token'] === 'string' ? answer['token'] : undefined;
    const header = headers['x-auth-token'];
    const value = fromBody ?? (typeof header === 'string' ? header : undefined);
    if (value === undefined || value === '') return { ok: false, reason: 'malformed_response' };
    const expire = isRecord(answer) && typeof answer['expire'] === 'number' ? answer['expire'] * 1000 : now() + ASSUMED_TOKEN_LIFE_MS;
    token = { value, renewAtMs: expire - RENEW_BEFORE_EXPIRY_MS };
    return { ok: true };
  }

  /**
   * POSTs lowstate with a valid token. A failed login means the lowstate was
   * never sent (`sent: false`); a 401 on the lowstate renews the token once.
   */
  async function postLowstate(lowstate: readonly object[], deadlineMs: number): Promise<Authorized> {
    const startedAt = now();
    const remaining = (): number => Math.max(1, deadlineMs - (now() - startedAt));
    for (let attempt = 0; attempt < 2; attempt += 1) {
      if (token === undefined || now() >= token.renewAtMs) {
        const loggedIn = await login(remaining());
        if (!loggedIn.ok) return { ok: false, sent: false, reason: loggedIn.reason };
      }
      const current = token as Token;
      const outcome: HttpOutcome = await exchange(endpoint('./'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-auth-token': current.value },
        body: JSON.stringify(lowstate),
        deadlineMs: remaining(),
      });
      if (!outcome.ok) return outcome;
      if (outcome.response.status === 401) {
        token = undefined;
        continue;
      }
      return outcome;
    }
    return { ok: false, sent: false, reason: 'auth_failed' };
  }

  return {
    async publish(minionId, jid, fun, args): Promise<PublishOutcome> {
      const outcome = await postLowstate([{ client: 'local_async', tgt: [minionId], tgt_type: 'list', fun, arg: [...args], jid }], timeoutMs);
      if (!outcome.ok) return outcome.sent ? { kind: 'uncertain', reason: outcome.reason } : { kind: 'not_sent', reason: outcome.reason };
      const { status, body } = outcome.response;
      if (status >= 500) return { kind: 'uncertain', reason: 'server_error' };
      if (status !== 200) return { kind: 'uncertain', reason: 'http_error' };
      const ack = firstReturn(body);
      if (!isRecord(ack)) return { kind: 'uncertain', reason: 'malformed_response' };
      // {} is salt-api's answer when no accepted key matched (the master's jid was None).
      if (Object.keys(ack).length === 0) return { kind: 'uncertain', reason: 'no_matching_minion' };
      if (ack['jid'] !== jid) return { kind: 'uncertain', reason: 'jid_mismatch' };
      const minions = ack['minions'];
      if (!Array.isArray(minions) || minions.length !== 1 || minions[0] !== minionId) {
        return { kind: 'uncertain', reason: 'malformed_response' };
      }
      return { kind: 'acked' };
    },

    async call(minionId, fun, args, callTimeoutMs): Promise<CallOutcome> {
      // Salt's `timeout` is not a hard cap (find_job keeps extending it), so
      // the HTTP deadline is ours and Salt is asked to give up a bit earlier.
      const saltTimeoutS = Math.max(1, Math.floor((callTimeoutMs * 0.8) / 1000));
      const outcome = await postLowstate(
        [{ client: 'local', tgt: [minionId], tgt_type: 'list', fun, arg: [...args], timeout: saltTimeoutS, full_return: true }],
        callTimeoutMs,
      );
      if (!outcome.ok) return { kind: 'failed', reason: outcome.reason, sent: outcome.sent };
      const { status, body } = outcome.response;
      if (status >= 500) return { kind: 'failed', reason: 'server_error', sent: true };
      if (status !== 200) return { kind: 'failed', reason: 'http_error', sent: true };
      const answers = firstReturn(body);
      if (!isRecord(answers)) return { kind: 'failed', reason: 'malformed_response', sent: true };
      if (Object.keys(answers).length === 0) return { kind: 'no_target' };
      const mine = answers[minionId];
      if (mine === false) return { kind: 'no_return' };
      if (!isRecord(mine) || !Object.hasOwn(mine, 'ret') || typeof mine['retcode'] !== 'number') {
        return { kind: 'failed', reason: 'malformed_response', sent: true };
      }
      return { kind: 'returned', retcode: mine['retcode'], ret: mine['ret'] };
    },
  };
}
