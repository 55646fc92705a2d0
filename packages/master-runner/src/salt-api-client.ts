import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { readPrivatePasswordFile } from './credentials.js';
import { MasterRunnerError } from './errors.js';
import { createExchangeGate } from './exchange-gate.js';
import { exchange, type HttpOutcome, type HttpResponse } from './http-request.js';
import { parseJsonText } from './json-text.js';
import { followEventStream } from './salt-event-stream.js';
import type {
  CallOptions,
  CallOutcome,
  EventStreamEnd,
  FollowEventsOptions,
  SaltCall,
  FleetAnswer,
  FleetCallOutcome,
  FleetTarget,
  PublishOutcome,
  SaltClient,
  SaltFailureReason,
  SaltEventSource,
  SaltFleetClient,
} from './salt-client.js';
import { isPlainObject } from './plain-object.js';

/*
 * SaltClient over salt-api's rest_cherrypy (research/salt-internals.md §7–8):
 *   POST /login {username, password, eauth}  → token (body return[0].token, header X-Auth-Token)
 *   POST /  [{client:"local_async", tgt:[id], tgt_type:"list", fun, arg, jid}]  publication under our JID
 *   POST /  [{client:"local", tgt:[id], tgt_type:"list", fun, arg, timeout, gather_job_timeout, full_return:true}]  synchronous call
 *   POST /  [{client:"local", tgt:"client-*", tgt_type:"glob", ...}]  a read-only call to the fleet
 * `tgt_type: list` hits exactly the accepted keys named, with no glob meaning.
 * For `local`, salt-api runs LocalClient.cmd (salt/netapi/__init__.py:224-239):
 * it answers `{}` when no accepted key matched (no publication at all,
 * client/__init__.py:337-342 and 770-771), and `false` for every minion the publication
 * expected that did not return (client/__init__.py:787-788). The expected
 * minions of a glob are every accepted key it matches, from the master's pki
 * directory (utils/minions.py:226-230, _pki_minions), connected or not.
 *
 * Tokens: the login answer's lifetime (`expire` − `start`) is tracked on the
 * injected clock, from the moment the login was sent. A token is renewed
 * BEFORE it is used when there is none or it is near its expiry; for a
 * publication, "near" covers the whole publication deadline too.
 *
 * A publication is sent at most once per publish() call, whatever comes back.
 * Only a failure that provably sent none of its bytes (a failed login before
 * it, or a connection to salt-api that was never established) is `not_sent`.
 * Any answer to the publication request itself, a 401 included, means its
 * bytes left this process: a valid acknowledgement is `acked`, anything else
 * is `uncertain` and is never retried (we do not rely on how salt-api orders
 * its session check against running the lowstate).
 * The idempotent reads (`call`: capabilities, status) re-login once after a
 * 401 and are sent again, and are retried (a bounded number of times, after a
 * short jittered pause, inside their deadline) when salt-api answers 5xx or
 * the connection breaks: a read changes nothing, and a 500 may be salt-api's
 * `.root_key` race (exchange-gate.ts).
 *
 * Concurrency (exchange-gate.ts): reads run in parallel, up to
 * `maxConcurrentCalls`, over kept-alive connections, sharing one login (a
 * token expired or refused for many reads at once is renewed once). A
 * publication runs alone, on a fresh connection (http-request.ts: the
 * "provably not sent" proof needs one), after the reads in flight ended.
 * Share ONE client per process between the poller, the publisher and
 * everything else, or the gate cannot keep publications apart from reads.
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
  /** Reads (status and capability calls, logins) in flight at once; default 64 (salt-api's thread pool is 100). */
  readonly maxConcurrentCalls?: number;
  /** How often a read is sent again after a 5xx or a broken connection; default 2. */
  readonly readRetries?: number;
  /** Pause before the first retry of a read (ms; later ones wait longer, all jittered); default 25. */
  readonly retryPauseMs?: number;
  /** In [0, 1): the jitter of retry pauses; tests pin it. */
  readonly random?: () => number;
  /** Told about every retried read, with why (metrics). */
  readonly onReadRetry?: (reason: SaltFailureReason) => void;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_CONCURRENT_CALLS = 64;
const DEFAULT_READ_RETRIES = 2;
const DEFAULT_RETRY_PAUSE_MS = 25;
/** Failures of a read that another attempt may not meet (salt-api's 5xx included). */
const RETRYABLE: ReadonlySet<SaltFailureReason> = new Set(['server_error', 'connection_reset', 'network_error']);
/** Renew this long before salt-api says the token expires. */
const RENEW_BEFORE_EXPIRY_MS = 60_000;
/** When salt-api omits `expire`, assume a short life rather than Salt's 12 h default. */
const ASSUMED_TOKEN_LIFE_MS = 10 * 60_000;
const EAUTH = /^[a-z][a-z0-9_]{0,31}$/;

interface Token {
  readonly value: string;
  /** When salt-api stops accepting it, on the injected clock. */
  readonly expiresAtMs: number;
}

type LoginResult = { readonly ok: true; readonly token: Token } | { readonly ok: false; readonly reason: SaltFailureReason };

type Authorized =
  | { readonly ok: true; readonly response: HttpResponse }
  | { readonly ok: false; readonly sent: boolean; readonly reason: SaltFailureReason };

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


/** The single element of rest_cherrypy's `{"return": [x]}` envelope. */
function firstReturn(body: string): unknown {
  const parsed = parseJsonText(body);
  if (!isPlainObject(parsed) || !Array.isArray(parsed['return']) || parsed['return'].length !== 1) return undefined;
  return parsed['return'][0];
}

/** The salt-api client: single-minion publications and calls, read-only fleet calls and the event stream. */
export type SaltApiClient = SaltClient &
  SaltFleetClient &
  SaltEventSource & {
    /** Reads in flight now. */
    readonly callsInFlight: number;
    /**
     * Logs in afresh (a read: it waits for a publication in flight) and says
     * whether salt-api accepted it: a reachability and credentials check for
     * a readiness probe. The new token replaces the current one.
     */
    checkLogin(timeoutMs: number): Promise<{ readonly ok: true } | { readonly ok: false; readonly reason: SaltFailureReason }>;
    /** Closes the kept-alive connections (the client stays usable: the next read opens new ones). */
    close(): void;
  };

/** One entry of a `local` answer with `full_return: true`. */
function fleetAnswer(entry: unknown): FleetAnswer {
  if (entry === false) return { kind: 'no_return' };
  if (!isPlainObject(entry) || !Object.hasOwn(entry, 'ret') || typeof entry['retcode'] !== 'number') return { kind: 'malformed' };
  return { kind: 'returned', retcode: entry['retcode'], ret: entry['ret'] };
}

export function createSaltApiClient(options: SaltApiClientOptions): SaltApiClient {
  const base = parseBaseUrl(options.url);
  if (typeof options.username !== 'string' || options.username === '' || options.username.length > 256) {
    throw new MasterRunnerError('config_invalid', 'the salt-api user name is missing or too long');
  }
  const eauth = options.eauth ?? 'pam';
  if (!EAUTH.test(eauth)) throw new MasterRunnerError('config_invalid', 'the salt-api eauth backend name is malformed');
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0)
    throw new MasterRunnerError('config_invalid', 'the salt-api timeout must be a positive integer');
  const maxConcurrentCalls = options.maxConcurrentCalls ?? DEFAULT_MAX_CONCURRENT_CALLS;
  if (!Number.isInteger(maxConcurrentCalls) || maxConcurrentCalls <= 0)
    throw new MasterRunnerError('config_invalid', 'the salt-api call concurrency must be a positive integer');
  const readRetries = options.readRetries ?? DEFAULT_READ_RETRIES;
  if (!Number.isInteger(readRetries) || readRetries < 0)
    throw new MasterRunnerError('config_invalid', 'the salt-api read retries must be a non-negative integer');
  const retryPauseMs = options.retryPauseMs ?? DEFAULT_RETRY_PAUSE_MS;
  const random = options.random ?? Math.random;
  const password = readPrivatePasswordFile(options.passwordFile);
  const now = options.now ?? Date.now;
  const username = options.username;
  let token: Token | undefined;
  let pendingLogin: Promise<LoginResult> | undefined;
  const gate = createExchangeGate(maxConcurrentCalls);
  // Reads only. Kept-alive sockets are unref'd while idle, so they never hold the process open.
  const readAgent =
    base.protocol === 'https:'
      ? new HttpsAgent({ keepAlive: true, maxSockets: maxConcurrentCalls })
      : new HttpAgent({ keepAlive: true, maxSockets: maxConcurrentCalls });

  const endpoint = (path: string): URL => new URL(path, base);

  async function login(deadlineMs: number, agent: HttpAgent | undefined): Promise<LoginResult> {
    const sentAtMs = now();
    const outcome = await exchange(endpoint('login'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ username, password, eauth }),
      deadlineMs,
      ...(agent === undefined ? {} : { agent }),
    });
    if (!outcome.ok) return { ok: false, reason: outcome.reason };
    const { status, headers, body } = outcome.response;
    if (status === 401 || status === 403) return { ok: false, reason: 'auth_failed' };
    if (status >= 500) return { ok: false, reason: 'server_error' };
    if (status !== 200) return { ok: false, reason: 'http_error' };
    const answer = firstReturn(body);
    const fromBody = isPlainObject(answer) && typeof answer['token'] === 'string' ? answer['token'] : undefined;
    const header = headers['x-auth-token'];
    const value = fromBody ?? (typeof header === 'string' ? header : undefined);
    if (value === undefined || value === '') return { ok: false, reason: 'malformed_response' };
    token = { value, expiresAtMs: sentAtMs + tokenLifeMs(answer, sentAtMs) };
    return { ok: true, token };
  }

  /**
   * How long salt-api will accept the token. `expire - start` (both from
   * salt-api's clock) is independent of clock skew; `expire` alone is read
   * against ours; without either, a short life is assumed.
   */
  function tokenLifeMs(answer: unknown, sentAtMs: number): number {
    const expire =
      isPlainObject(answer) && typeof answer['expire'] === 'number' && Number.isFinite(answer['expire']) ? answer['expire'] : undefined;
    const start = isPlainObject(answer) && typeof answer['start'] === 'number' && Number.isFinite(answer['start']) ? answer['start'] : undefined;
    if (expire === undefined) return ASSUMED_TOKEN_LIFE_MS;
    const life = start === undefined ? expire * 1000 - sentAtMs : (expire - start) * 1000;
    return Math.max(0, life);
  }

  /**
   * A token that stays valid for `needMs` more (plus the renewal margin),
   * logging in first when needed. Concurrent reads share one login.
   */
  async function freshToken(needMs: number, deadlineMs: number, agent: HttpAgent | undefined): Promise<LoginResult> {
    if (token !== undefined && now() + needMs < token.expiresAtMs - RENEW_BEFORE_EXPIRY_MS) return { ok: true, token };
    if (pendingLogin !== undefined) return pendingLogin;
    token = undefined;
    const started = login(deadlineMs, agent);
    pendingLogin = started;
    try {
      return await started;
    } finally {
      pendingLogin = undefined;
    }
  }

  /** salt-api refused `used`: forget it, unless another exchange already replaced it. */
  function forget(used: Token): void {
    if (token === used) token = undefined;
  }

  function post(lowstate: readonly object[], current: Token, deadlineMs: number, agent?: HttpAgent, signal?: AbortSignal): Promise<HttpOutcome> {
    return exchange(endpoint('./'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-auth-token': current.value },
      body: JSON.stringify(lowstate),
      deadlineMs,
      ...(agent === undefined ? {} : { agent }),
      ...(signal === undefined ? {} : { signal }),
    });
  }

  /** A deadline shared by the login and the request that follows it. */
  function budget(totalMs: number): () => number {
    const startedAt = now();
    return () => Math.max(1, totalMs - (now() - startedAt));
  }

  /**
   * The publication: at most one POST of the lowstate. A failed login means
   * it was never sent; after it is sent, every answer is final.
   */
  async function postOnce(lowstate: readonly object[], deadlineMs: number): Promise<Authorized> {
    const remaining = budget(deadlineMs);
    // Fresh connections only: the login's failure must prove the publication unsent, and the publication's connection its own.
    const fresh = await freshToken(deadlineMs, remaining(), undefined);
    if (!fresh.ok) return { ok: false, sent: false, reason: fresh.reason };
    const outcome = await post(lowstate, fresh.token, remaining());
    if (outcome.ok && outcome.response.status === 401) forget(fresh.token);
    return outcome;
  }

  /** One try of an idempotent read: after a 401 the token is renewed and the lowstate sent once more. */
  async function postIdempotent(lowstate: readonly object[], remaining: () => number, signal: AbortSignal | undefined): Promise<Authorized> {
    let sent = false;
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const fresh = await freshToken(0, remaining(), readAgent);
      if (!fresh.ok) return { ok: false, sent, reason: fresh.reason };
      const outcome = await post(lowstate, fresh.token, remaining(), readAgent, signal);
      if (!outcome.ok) return { ok: false, sent: sent || outcome.sent, reason: outcome.reason };
      sent = true;
      if (outcome.response.status !== 401) return outcome;
      forget(fresh.token);
    }
    return { ok: false, sent: true, reason: 'unauthorized' };
  }

  /** Why another try of a read may do better, or undefined when it would not. */
  function retryReason(outcome: Authorized): SaltFailureReason | undefined {
    if (!outcome.ok) return RETRYABLE.has(outcome.reason) ? outcome.reason : undefined;
    return outcome.response.status >= 500 ? 'server_error' : undefined;
  }

  /** An idempotent read, retried after a 5xx or a broken connection while its deadline allows. */
  async function postRead(lowstate: readonly object[], deadlineMs: number, signal: AbortSignal | undefined): Promise<Authorized> {
    const remaining = budget(deadlineMs);
    for (let retry = 0; ; retry += 1) {
      const outcome = await postIdempotent(lowstate, remaining, signal);
      const reason = retryReason(outcome);
      if (reason === undefined || retry >= readRetries || signal?.aborted === true) return outcome;
      // Full jitter over a growing window, so reads that failed together do not come back together.
      const pauseMs = Math.round(retryPauseMs * (retry + 1) * (0.5 + random()));
      if (pauseMs >= remaining()) return outcome;
      options.onReadRetry?.(reason);
      try {
        await sleep(pauseMs, undefined, signal === undefined ? {} : { signal });
      } catch {
        return outcome; // aborted while pausing
      }
    }
  }

  function read<T>(work: () => Promise<T>): Promise<T> {
    return gate.run('read', work);
  }

  return {
    publish: (minionId, jid, fun, args) => gate.run('publication', () => publishNow(minionId, jid, fun, args)),
    call: (minionId, fun, args, callTimeoutMs, callOptions) => read(() => callNow(minionId, fun, args, callTimeoutMs, callOptions)),
    callMany: (calls, callTimeoutMs, callOptions) => read(() => callManyNow(calls, callTimeoutMs, callOptions)),
    callFleet: (target, fun, args, callTimeoutMs) => read(() => callFleetNow(target, fun, args, callTimeoutMs)),
    followEvents: (onEvent, followOptions) => followEvents(onEvent, followOptions),
    get callsInFlight() {
      return gate.readsInFlight;
    },
    checkLogin: (checkTimeoutMs) =>
      read(async () => {
        const outcome = await login(checkTimeoutMs, readAgent);
        return outcome.ok ? { ok: true as const } : { ok: false as const, reason: outcome.reason };
      }),
    close: () => readAgent.destroy(),
  };

  /**
   * One connection to `GET /events`. The token comes from a (gated) login;
   * the stream itself builds no NetapiClient in salt-api (Events.GET,
   * salt/netapi/rest_cherrypy/app.py:2235-2437, checks the token through its
   * own Resolver), so it runs outside the gate, on a connection of its own.
   */
  async function followEvents(
    onEvent: (event: unknown) => void,
    followOptions: FollowEventsOptions,
  ): Promise<EventStreamEnd> {
    const connectTimeoutMs = followOptions.connectTimeoutMs ?? timeoutMs;
    const fresh = await read(() => freshToken(0, connectTimeoutMs, readAgent));
    if (!fresh.ok) return { kind: 'failed', reason: fresh.reason };
    const end = await followEventStream(endpoint('events'), {
      token: fresh.token.value,
      connectTimeoutMs,
      signal: followOptions.signal,
      onEvent,
      ...(followOptions.onOpen === undefined ? {} : { onOpen: followOptions.onOpen }),
    });
    if (end.kind === 'failed' && end.reason === 'unauthorized') forget(fresh.token);
    return end;
  }

  async function publishNow(minionId: string, jid: string, fun: string, args: readonly unknown[]): Promise<PublishOutcome> {
    const outcome = await postOnce([{ client: 'local_async', tgt: [minionId], tgt_type: 'list', fun, arg: [...args], jid }], timeoutMs);
    if (!outcome.ok) return outcome.sent ? { kind: 'uncertain', reason: outcome.reason } : { kind: 'not_sent', reason: outcome.reason };
    const { status, body } = outcome.response;
    // The request was sent: a rejected session does not prove it was not acted on.
    if (status === 401) return { kind: 'uncertain', reason: 'unauthorized' };
    if (status >= 500) return { kind: 'uncertain', reason: 'server_error' };
    if (status !== 200) return { kind: 'uncertain', reason: 'http_error' };
    const ack = firstReturn(body);
    if (!isPlainObject(ack)) return { kind: 'uncertain', reason: 'malformed_response' };
    // {} is salt-api's answer when no accepted key matched (the master's jid was None).
    if (Object.keys(ack).length === 0) return { kind: 'uncertain', reason: 'no_matching_minion' };
    if (ack['jid'] !== jid) return { kind: 'uncertain', reason: 'jid_mismatch' };
    const minions = ack['minions'];
    if (!Array.isArray(minions) || minions.length !== 1 || minions[0] !== minionId) {
      return { kind: 'uncertain', reason: 'malformed_response' };
    }
    return { kind: 'acked' };
  }

  /**
   * A synchronous `local` chunk. Salt waits `timeout`, then asks the minions
   * that have not returned whether the job still runs and waits
   * `gather_job_timeout` for that (client/__init__.py:1146-1148, per call): a
   * stopped minion costs both. Neither is a hard cap (a job still running
   * extends them), so the HTTP deadline is ours, and Salt is asked to finish
   * well inside it.
   */
  function localChunk(tgt: string | readonly string[], tgtType: 'list' | 'glob', fun: string, args: readonly unknown[], callTimeoutMs: number): object {
    const saltTimeoutS = Math.max(1, Math.floor((callTimeoutMs * 0.6) / 1000));
    const gatherJobTimeoutS = Math.max(1, Math.floor((callTimeoutMs * 0.2) / 1000));
    return {
      client: 'local',
      tgt: typeof tgt === 'string' ? tgt : [...tgt],
      tgt_type: tgtType,
      fun,
      arg: [...args],
      timeout: saltTimeoutS,
      gather_job_timeout: gatherJobTimeoutS,
      full_return: true,
    };
  }

  /** `local` chunks in one exchange; one answers map per chunk, or why there are none. */
  async function localMany(
    chunks: readonly object[],
    deadlineMs: number,
    signal?: AbortSignal,
  ): Promise<{ ok: true; answers: Record<string, unknown>[] } | { ok: false; reason: SaltFailureReason; sent: boolean }> {
    const outcome = await postRead(chunks, deadlineMs, signal);
    if (!outcome.ok) return { ok: false, reason: outcome.reason, sent: outcome.sent };
    const { status, body } = outcome.response;
    if (status >= 500) return { ok: false, reason: 'server_error', sent: true };
    if (status !== 200) return { ok: false, reason: 'http_error', sent: true };
    const parsed = parseJsonText(body);
    const returns = isPlainObject(parsed) ? parsed['return'] : undefined;
    if (!Array.isArray(returns) || returns.length !== chunks.length || !returns.every(isPlainObject)) {
      return { ok: false, reason: 'malformed_response', sent: true };
    }
    return { ok: true, answers: returns };
  }

  /** A synchronous `local` call; its answers map, or why there is none. */
  async function local(
    tgt: string | readonly string[],
    tgtType: 'list' | 'glob',
    fun: string,
    args: readonly unknown[],
    callTimeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ ok: true; answers: Record<string, unknown> } | { ok: false; reason: SaltFailureReason; sent: boolean }> {
    const outcome = await localMany([localChunk(tgt, tgtType, fun, args, callTimeoutMs)], callTimeoutMs, signal);
    if (!outcome.ok) return outcome;
    return { ok: true, answers: outcome.answers[0] as Record<string, unknown> };
  }

  /** One minion's outcome in a `local` answers map. */
  function minionOutcome(minionId: string, answers: Record<string, unknown>): CallOutcome {
    if (Object.keys(answers).length === 0) return { kind: 'no_target' };
    const mine = answers[minionId];
    if (mine === false) return { kind: 'no_return' };
    if (!isPlainObject(mine) || !Object.hasOwn(mine, 'ret') || typeof mine['retcode'] !== 'number') {
      return { kind: 'failed', reason: 'malformed_response', sent: true };
    }
    return { kind: 'returned', retcode: mine['retcode'], ret: mine['ret'] };
  }

  async function callManyNow(calls: readonly SaltCall[], callTimeoutMs: number, callOptions: CallOptions = {}): Promise<CallOutcome[]> {
    if (calls.length === 0) return [];
    const chunks = calls.map((c) => localChunk([c.minionId], 'list', c.fun, c.args, callTimeoutMs));
    // salt-api runs the chunks one after another: the exchange may take each call's time.
    const outcome = await localMany(chunks, callTimeoutMs * calls.length, callOptions.signal);
    if (!outcome.ok) return calls.map(() => ({ kind: 'failed', reason: outcome.reason, sent: outcome.sent }));
    return calls.map((c, i) => minionOutcome(c.minionId, outcome.answers[i] as Record<string, unknown>));
  }

  async function callFleetNow(target: FleetTarget, fun: string, args: readonly unknown[], callTimeoutMs: number): Promise<FleetCallOutcome> {
    const outcome = 'glob' in target ? await local(target.glob, 'glob', fun, args, callTimeoutMs) : await local(target.list, 'list', fun, args, callTimeoutMs);
    if (!outcome.ok) return { kind: 'failed', reason: outcome.reason, sent: outcome.sent };
    return { kind: 'returned', answers: new Map(Object.entries(outcome.answers).map(([id, entry]) => [id, fleetAnswer(entry)])) };
  }

  async function callNow(
    minionId: string,
    fun: string,
    args: readonly unknown[],
    callTimeoutMs: number,
    callOptions: CallOptions = {},
  ): Promise<CallOutcome> {
    const outcome = await local([minionId], 'list', fun, args, callTimeoutMs, callOptions.signal);
    if (!outcome.ok) return { kind: 'failed', reason: outcome.reason, sent: outcome.sent };
    return minionOutcome(minionId, outcome.answers);
  }
}
