import { waitFor } from './topology-process.js';

/*
 * The topology's salt-api client (rest_cherrypy, eauth `file`) and the
 * readiness waits built on it.
 */

/** A salt-api low-state chunk (without credentials: the topology adds its token). */
export type LowState = Record<string, unknown>;

export type ClientReceiptsResults = Record<string, Record<string, { result: unknown; changes: unknown }>>;

export interface TopologyApi {
  /** salt-api login (eauth `file`) → token; cached and refreshed on 401 by `saltApi`. */
  login(): Promise<string>;
  /** POST / with the token; returns the parsed `return` array. */
  saltApi(lowstate: LowState | LowState[], options?: { timeoutMs?: number }): Promise<unknown[]>;
  /** test.ping on exactly these minions (`local`, `tgt_type: list`). */
  ping(minionIds: string[]): Promise<Record<string, unknown>>;
  /** Waits until every one of the minions answers test.ping. */
  waitMinionsAnswer(minionIds: string[], timeoutMs: number): Promise<void>;
  /** Waits until salt-api accepts a login. */
  waitLogin(timeoutMs: number): Promise<void>;
  /** state.apply client_receipts; throws unless every state of every minion succeeded. */
  applyClientReceipts(minionIds: string[]): Promise<ClientReceiptsResults>;
}

export function createTopologyApi(settings: { url: string; username: string; password: string }): TopologyApi {
  const { url, username, password } = settings;
  let token: string | null = null;

  const login = async (): Promise<string> => {
    const response = await fetch(`${url}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ username, password, eauth: 'file' }),
      signal: AbortSignal.timeout(10_000),
    });
    if (response.status !== 200) throw new Error(`salt-api login answered HTTP ${response.status}`);
    const body = (await response.json()) as { return?: Array<{ token?: string }> };
    const value = body.return?.[0]?.token;
    if (typeof value !== 'string') throw new Error('salt-api login returned no token');
    token = value;
    return value;
  };

  const saltApi = async (lowstate: LowState | LowState[], opts: { timeoutMs?: number } = {}): Promise<unknown[]> => {
    for (let attempt = 0; ; attempt += 1) {
      const current = token ?? (await login());
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Auth-Token': current },
        body: JSON.stringify(Array.isArray(lowstate) ? lowstate : [lowstate]),
        signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000),
      });
      if (response.status === 401 && attempt === 0) {
        token = null;
        continue;
      }
      if (response.status !== 200) throw new Error(`salt-api answered HTTP ${response.status}: ${await response.text()}`);
      const body = (await response.json()) as { return?: unknown[] };
      if (!Array.isArray(body.return)) throw new Error('salt-api answer has no return array');
      return body.return;
    }
  };

  const ping = async (ids: string[]): Promise<Record<string, unknown>> => {
    // Short timeouts: a minion that is not connected yet costs one short round, not 5 s + gather_job_timeout.
    const [answer] = await saltApi({ client: 'local', tgt: ids, tgt_type: 'list', fun: 'test.ping', timeout: 2, gather_job_timeout: 1 });
    return (answer ?? {}) as Record<string, unknown>;
  };

  const waitMinionsAnswer = async (ids: string[], timeoutMs: number) => {
    const pending = new Set(ids);
    await waitFor(`minions ${[...pending].join(', ')} to answer test.ping`, timeoutMs, async () => {
      const answer = await ping([...pending]);
      for (const id of [...pending]) if (answer[id] === true) pending.delete(id);
      return pending.size === 0 ? true : undefined;
    }, 200);
  };

  const waitLogin = async (timeoutMs: number) => {
    await waitFor('salt-api to accept a login', timeoutMs, async () => (await login()) || undefined, 200);
  };

  const applyClientReceipts = async (ids: string[]): Promise<ClientReceiptsResults> => {
    const [answer] = await saltApi(
      { client: 'local', tgt: ids, tgt_type: 'list', fun: 'state.apply', arg: ['client_receipts'], timeout: 60 },
      { timeoutMs: 90_000 },
    );
    const results = (answer ?? {}) as Record<string, unknown>;
    const out: ClientReceiptsResults = {};
    for (const id of ids) {
      const states = results[id];
      if (states === null || typeof states !== 'object' || Array.isArray(states)) {
        throw new Error(`topology: client_receipts did not return a state mapping for ${id}: ${JSON.stringify(states)}`);
      }
      const mapping = states as Record<string, { result: unknown; changes: unknown; comment?: unknown }>;
      const failed = Object.entries(mapping).filter(([, s]) => s.result !== true);
      if (Object.keys(mapping).length === 0 || failed.length > 0) {
        throw new Error(`topology: client_receipts failed on ${id}: ${JSON.stringify(failed)}`);
      }
      out[id] = Object.fromEntries(Object.entries(mapping).map(([k, s]) => [k, { result: s.result, changes: s.changes }]));
    }
    return out;
  };

  return { login, saltApi, ping, waitMinionsAnswer, waitLogin, applyClientReceipts };
}
