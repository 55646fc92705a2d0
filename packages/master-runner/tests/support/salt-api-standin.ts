import { stateDigest } from '@oduflow/protocol';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/*
 * A salt-api (rest_cherrypy) stand-in: a real HTTP server speaking the subset
 * the runner uses (POST /login, POST / with local_async and local chunks), in
 * front of simulated minions that behave like oduflow_job: a publication runs
 * the request once and leaves a receipt; status answers from that evidence.
 * It counts every publication per request id and per JID, which is what the
 * "never a second publication" assertions read.
 */

type PublishMode =
  /** Publish and acknowledge. */
  | 'ack'
  /** Publish, then drop the connection before answering. */
  | 'lost_ack'
  /** Publish, then never answer. */
  | 'hang'
  /** Publish, then answer 500. */
  | 'error_500'
  /** Answer {} (no accepted key matched); nothing is published. */
  | 'no_match'
  /** Publish, then hold the answer (an acknowledgement) until releaseHeld(). */
  | 'hold'
  /** Publish, then answer 200 with `publishBody` verbatim. */
  | 'raw';

/** A raw answer for a `local` call, or a transport-level behaviour. */
export type CallReply =
  | { readonly ret: unknown; readonly retcode: number }
  | { readonly noReturn: true }
  | { readonly noTarget: true }
  | { readonly httpStatus: number }
  | { readonly body: string }
  | { readonly hang: true }
  /** The reply, sent only once `after` settles (to order racing callers). */
  | { readonly after: Promise<void>; readonly reply: CallReply };

interface Publication {
  readonly minionId: string;
  readonly jid: string;
  readonly fun: string;
  readonly args: readonly unknown[];
}

/** What a simulated minion reaches when it runs a request (or its refusal of it). */
type SimulatedResult =
  | { status: 'succeeded' | 'failed' | 'unknown'; passed: number; total: number }
  | { status: 'refused'; passed: 0; total: 0; reason: string };

interface Execution {
  readonly jid: string;
  readonly profile: string;
  readonly digest: string;
}

export interface StandInOptions {
  readonly username?: string;
  readonly password?: string;
  /** Token lifetime reported by /login, seconds. */
  readonly tokenLifeS?: number;
  /** Every `local` call is answered this long after it arrived (a minion's round trip); default 0. */
  readonly callDelayMs?: number;
  /**
   * Keep every chunk in `calls` and `lowstates` (default true). A fleet-scale
   * bench turns it off: hundreds of thousands of calls would only fill memory.
   */
  readonly recordCalls?: boolean;
}

export interface SaltApiStandIn {
  readonly url: string;
  readonly username: string;
  readonly password: string;
  readonly publications: Publication[];
  /** Every chunk received on POST / (after auth), in order. */
  readonly calls: { readonly client: string; readonly fun: string; readonly tgt: unknown; readonly tgtType: unknown; readonly args: readonly unknown[] }[];
  /** The same chunks, exactly as received. */
  readonly lowstates: Record<string, unknown>[];
  logins: number;
  /** Every chunk received on POST / (after auth), counted even when `recordCalls` is off. */
  callCount: number;
  /** POST / requests that carried more than one chunk. */
  batches: number;
  /** POST / requests carrying a local_async chunk, counted on arrival, before the token is checked. */
  publicationRequests: number;
  /** Every token /login handed out. */
  readonly tokensIssued: string[];
  publishMode: PublishMode;
  /** The body answered to a publication in `raw` mode. */
  publishBody: string;
  /** Overrides the /login answer (status and raw body) when it returns one. */
  loginReply: (() => { readonly status: number; readonly body: string } | undefined) | undefined;
  /** Sends the acknowledgements held in `hold` mode. */
  releaseHeld(): void;
  /** Overrides the simulated capabilities answer (per minion, for single and fleet calls). */
  capabilities: (minionId: string) => CallReply;
  /**
   * The accepted minion keys. Undefined (the default): every minion named in
   * a single-minion call is accepted, and a glob matches none. Set: only these
   * match a `list` or `glob` target, like the master's pki directory.
   */
  acceptedKeys: string[] | undefined;
  /** Overrides the simulated status answer; `simulated` is what the minion would say. */
  status: (args: readonly unknown[], minionId: string, simulated: CallReply) => CallReply;
  /** The result the simulated minion reaches when it runs a request (or its refusal of it). */
  result: SimulatedResult;
  /** The result per minion (default: `result` for every minion). */
  resultOf: (minionId: string) => SimulatedResult;
  /**
   * Called for every publication as it arrives (after it was counted, before
   * it is answered), with the stand-in's clock: timeline checks read it.
   */
  onPublication: ((publication: Publication & { readonly at: number }) => void) | undefined;
  publicationsOf(requestId: string): number;
  publicationsUnder(jid: string): number;
  /** Forgets every issued token: the next authenticated call gets 401 (as after a salt-api restart). */
  dropTokens(): void;
  /**
   * Fire `salt/job/<jid>/ret/<minion>` on `GET /events` after every
   * acknowledged publication, carrying what the simulated minion's `run`
   * returns (default true; nobody hears it unless a stream is open).
   */
  returnEvents: boolean;
  /** Streams open on `GET /events` now. */
  readonly eventStreams: number;
  /** Sends one event ({tag, data}) to every open stream. */
  emit(event: { readonly tag: string; readonly data: unknown }): void;
  /** Cuts every open event stream (a salt-api restart, a dropped connection). */
  dropEventStreams(): void;
  /** Answers `GET /events` with this HTTP status instead of a stream, while set. */
  eventsStatus: number | undefined;
  close(): Promise<void>;
}

/** The module digest the stand-in's minions report (any 64 lowercase hex; CLI tests pass it as --expected-sha256). */
export const STANDIN_MODULE_SHA256 = 'c0ffee00'.repeat(8);

/** A ready module 1.1.0 on the pinned Salt. */
export const GOOD_CAPABILITIES = {
  protocol: 1,
  module_version: '1.1.0',
  salt_version: '3006.27',
  module_sha256: STANDIN_MODULE_SHA256,
  ready: true,
  reasons: [],
};

/** What module 1.0.0 answered: three keys, no readiness. */
export const OLD_CAPABILITIES = { protocol: 1, module_version: '1.0.0', salt_version: '3006.27' };

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

export async function startSaltApiStandIn(options: StandInOptions = {}): Promise<SaltApiStandIn> {
  const username = options.username ?? 'oduflow';
  const password = options.password ?? `pw-${randomBytes(8).toString('hex')}`;
  const tokens = new Set<string>();
  const executions = new Map<string, Execution>();
  const sockets = new Set<Socket>();
  const held: (() => void)[] = [];
  const streams = new Set<ServerResponse>();

  const emit = (event: { readonly tag: string; readonly data: unknown }): void => {
    // rest_cherrypy's framing: a `tag:` line (not an SSE field) and the JSON in `data:` (app.py:2429-2432).
    for (const res of streams) res.write(`tag: ${event.tag}\ndata: ${JSON.stringify(event)}\n\n`);
  };

  /** What the simulated minion's `run` returned for a publication, as the master's return event. */
  const emitReturn = (minionId: string, jid: string, fun: string, args: readonly unknown[]): void => {
    if (!standIn.returnEvents || fun !== 'oduflow_job.run') return;
    const [requestId, profile, text] = args as string[];
    const done = executions.get(`${minionId}/${requestId}`);
    if (done === undefined || done.jid !== jid) return;
    const result = standIn.resultOf(minionId);
    const ret = { protocol: 1, minion_id: minionId, request_id: requestId, jid, profile, state_digest: profile === 'custom' ? stateDigest(text) : '', ...result };
    const retcode = result.status === 'refused' ? 1 : 0;
    emit({
      tag: `salt/job/${jid}/ret/${minionId}`,
      data: { cmd: '_return', id: minionId, jid, fun, fun_args: args, return: ret, retcode, success: retcode === 0, _stamp: new Date().toISOString() },
    });
  };

  const simulatedStatus = (args: readonly unknown[], minionId: string): CallReply => {
    const [requestId, jid, profile, digest] = args as string[];
    const done = executions.get(`${minionId}/${requestId}`);
    const shape = { protocol: 1, minion_id: minionId, request_id: requestId, jid, profile, state_digest: digest };
    if (done === undefined) return { retcode: 0, ret: { ...shape, status: 'not_started', passed: 0, total: 0 } };
    if (done.jid !== jid || done.profile !== profile || done.digest !== digest) {
      return { retcode: 1, ret: { protocol: 1, error: 'binding_conflict', message: 'the receipt for this request is bound to another JID' } };
    }
    return { retcode: 0, ret: { ...shape, ...standIn.resultOf(minionId) } };
  };

  const replyToCall = (res: ServerResponse, minionId: string, reply: CallReply): void => {
    if ('after' in reply) {
      void reply.after.then(() => replyToCall(res, minionId, reply.reply));
      return;
    }
    if ('hang' in reply) return;
    if ('httpStatus' in reply) return send(res, reply.httpStatus, { status: reply.httpStatus });
    if ('body' in reply) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(reply.body);
      return;
    }
    if ('noTarget' in reply) return send(res, 200, { return: [{}] });
    if ('noReturn' in reply) return send(res, 200, { return: [{ [minionId]: false }] });
    send(res, 200, { return: [{ [minionId]: { ret: reply.ret, retcode: reply.retcode, jid: '20261129000000000000' } }] });
  };

  /** The minions a `local` target matches among the accepted keys (glob: a trailing `*` only, enough for `client-*`). */
  const matched = (tgt: unknown, tgtType: unknown): string[] => {
    const accepted = standIn.acceptedKeys ?? [];
    if (tgtType === 'glob' && typeof tgt === 'string') {
      return accepted.filter((id) => (tgt.endsWith('*') ? id.startsWith(tgt.slice(0, -1)) : id === tgt));
    }
    const named = Array.isArray(tgt) ? tgt.filter((t): t is string => typeof t === 'string') : [];
    return standIn.acceptedKeys === undefined ? named : named.filter((id) => accepted.includes(id));
  };

  /** A `local` call to several minions: one entry per matched minion, `false` for those that do not return. */
  const replyToFleet = (res: ServerResponse, tgt: unknown, tgtType: unknown, fun: string, args: readonly unknown[]): void => {
    const answers: Record<string, unknown> = {};
    for (const id of matched(tgt, tgtType)) {
      const reply: CallReply =
        fun === 'oduflow_job.capabilities'
          ? standIn.capabilities(id)
          : fun === 'oduflow_job.status'
            ? standIn.status(args, id, simulatedStatus(args, id))
            : { retcode: 1, ret: `'${fun}' is not available.` };
      if ('httpStatus' in reply || 'body' in reply || 'hang' in reply || 'after' in reply) return replyToCall(res, id, reply);
      if ('noTarget' in reply) continue;
      answers[id] = 'noReturn' in reply ? false : { ret: reply.ret, retcode: reply.retcode, jid: '20261129000000000000' };
    }
    send(res, 200, { return: [answers] });
  };

  const handleChunk = (res: ServerResponse, chunk: Record<string, unknown>): void => {
    const tgt = chunk['tgt'];
    const minionId = Array.isArray(tgt) && typeof tgt[0] === 'string' ? tgt[0] : '';
    const fun = String(chunk['fun']);
    const args = Array.isArray(chunk['arg']) ? (chunk['arg'] as unknown[]) : [];
    if (options.recordCalls !== false) {
      standIn.calls.push({ client: String(chunk['client']), fun, tgt, tgtType: chunk['tgt_type'], args });
      standIn.lowstates.push(chunk);
    }
    standIn.callCount += 1;

    if (chunk['client'] === 'local_async') {
      const jid = String(chunk['jid']);
      if (standIn.publishMode === 'no_match') return send(res, 200, { return: [{}] });
      standIn.publications.push({ minionId, jid, fun, args });
      standIn.onPublication?.({ minionId, jid, fun, args, at: Date.now() });
      const [requestId, profile, text] = args as string[];
      const key = `${minionId}/${requestId}`;
      // Like oduflow_job: one execution per request; the receipt is bound to the first JID.
      if (!executions.has(key)) {
        executions.set(key, { jid, profile: String(profile), digest: profile === 'custom' ? stateDigest(text) : '' });
      }
      switch (standIn.publishMode) {
        case 'ack':
          send(res, 200, { return: [{ jid, minions: [minionId] }] });
          return emitReturn(minionId, jid, fun, args);
        case 'lost_ack':
          res.socket?.destroy();
          return;
        case 'hang':
          return;
        case 'error_500':
          return send(res, 500, { status: 500, message: 'Internal Server Error' });
        case 'hold':
          held.push(() => send(res, 200, { return: [{ jid, minions: [minionId] }] }));
          return;
        case 'raw':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(standIn.publishBody);
          return;
      }
    }
    if (chunk['client'] === 'local' && (options.callDelayMs ?? 0) > 0) {
      setTimeout(() => answerLocal(res, chunk, tgt, minionId, fun, args), options.callDelayMs);
      return;
    }
    if (chunk['client'] === 'local') return answerLocal(res, chunk, tgt, minionId, fun, args);
    send(res, 400, { status: 400, message: 'Client disabled' });
  };

  /**
   * Several `local` chunks in one request: like rest_cherrypy's exec_lowstate
   * (salt/netapi/rest_cherrypy/app.py:1200-1233), run one after the other
   * (each after `callDelayMs`) and answered together, `return[i]` for chunk i.
   * A transport-level reply for any chunk (an HTTP status, a raw body, a hang)
   * becomes the whole request's.
   */
  const handleBatch = (res: ServerResponse, chunks: readonly Record<string, unknown>[]): void => {
    standIn.batches += 1;
    const answers: unknown[] = [];
    for (const chunk of chunks) {
      const tgt = chunk['tgt'];
      const minionId = Array.isArray(tgt) && typeof tgt[0] === 'string' ? tgt[0] : '';
      const fun = String(chunk['fun']);
      const args = Array.isArray(chunk['arg']) ? (chunk['arg'] as unknown[]) : [];
      if (options.recordCalls !== false) {
        standIn.calls.push({ client: String(chunk['client']), fun, tgt, tgtType: chunk['tgt_type'], args });
        standIn.lowstates.push(chunk);
      }
      standIn.callCount += 1;
      if (chunk['client'] !== 'local' || !Array.isArray(tgt) || tgt.length !== 1) return send(res, 400, { status: 400 });
      const reply =
        fun === 'oduflow_job.status' ? standIn.status(args, minionId, simulatedStatus(args, minionId)) : { retcode: 1, ret: `'${fun}' is not available.` };
      if ('after' in reply || 'hang' in reply || 'httpStatus' in reply || 'body' in reply) return replyToCall(res, minionId, reply);
      answers.push('noTarget' in reply ? {} : 'noReturn' in reply ? { [minionId]: false } : { [minionId]: { ret: reply.ret, retcode: reply.retcode, jid: '20261129000000000000' } });
    }
    const delay = (options.callDelayMs ?? 0) * chunks.length;
    if (delay === 0) return send(res, 200, { return: answers });
    setTimeout(() => send(res, 200, { return: answers }), delay);
  };

  const answerLocal = (res: ServerResponse, chunk: Record<string, unknown>, tgt: unknown, minionId: string, fun: string, args: readonly unknown[]): void => {
    const fleet = chunk['tgt_type'] === 'glob' || (Array.isArray(tgt) && tgt.length !== 1) || standIn.acceptedKeys !== undefined;
    if (fleet) return replyToFleet(res, tgt, chunk['tgt_type'], fun, args);
    if (fun === 'oduflow_job.capabilities') return replyToCall(res, minionId, standIn.capabilities(minionId));
    if (fun === 'oduflow_job.status') return replyToCall(res, minionId, standIn.status(args, minionId, simulatedStatus(args, minionId)));
    return replyToCall(res, minionId, { retcode: 1, ret: `'${fun}' is not available.` });
  };

  const server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      if (req.method === 'POST' && req.url === '/login') {
        standIn.logins += 1;
        const override = standIn.loginReply?.();
        if (override !== undefined) {
          res.writeHead(override.status, { 'content-type': 'application/json' });
          res.end(override.body);
          return;
        }
        const creds = JSON.parse(body) as Record<string, unknown>;
        if (creds['username'] !== username || creds['password'] !== password) { send(res, 401, { status: 401 }); return; }
        const token = randomBytes(20).toString('hex');
        tokens.add(token);
        standIn.tokensIssued.push(token);
        const expire = Date.now() / 1000 + (options.tokenLifeS ?? 43200);
        send(res, 200, { return: [{ token, expire, start: Date.now() / 1000, user: username, eauth: creds['eauth'], perms: ['.*'] }] }, { 'x-auth-token': token }); return;
      }
      if (req.method === 'GET' && req.url === '/events') {
        const token = req.headers['x-auth-token'];
        if (standIn.eventsStatus !== undefined) { send(res, standIn.eventsStatus, { status: standIn.eventsStatus }); return; }
        if (typeof token !== 'string' || !tokens.has(token)) { send(res, 401, { status: 401 }); return; }
        res.writeHead(200, { 'content-type': 'text/event-stream;charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
        res.write('retry: 400\n');
        streams.add(res);
        res.on('close', () => streams.delete(res));
        return;
      }
      if (req.method === 'POST' && req.url === '/') {
        if (body.includes('"local_async"')) standIn.publicationRequests += 1;
        const token = req.headers['x-auth-token'];
        if (typeof token !== 'string' || !tokens.has(token)) { send(res, 401, { status: 401 }); return; }
        const lowstate = JSON.parse(body) as unknown;
        if (!Array.isArray(lowstate) || lowstate.length === 0) { send(res, 400, { status: 400 }); return; }
        if (lowstate.length === 1) { handleChunk(res, lowstate[0] as Record<string, unknown>); return; }
        handleBatch(res, lowstate as Record<string, unknown>[]); return;
      }
      send(res, 404, { status: 404 });
    })();
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const standIn: SaltApiStandIn = {
    url: `http://127.0.0.1:${port}`,
    username,
    password,
    publications: [],
    calls: [],
    lowstates: [],
    logins: 0,
    callCount: 0,
    batches: 0,
    publicationRequests: 0,
    tokensIssued: [],
    publishMode: 'ack',
    publishBody: '{}',
    loginReply: undefined,
    releaseHeld: () => {
      for (const answer of held.splice(0)) answer();
    },
    capabilities: () => ({ retcode: 0, ret: GOOD_CAPABILITIES }),
    acceptedKeys: undefined,
    status: (_args, _minion, simulated) => simulated,
    result: { status: 'succeeded', passed: 60, total: 60 },
    resultOf: () => standIn.result,
    onPublication: undefined,
    publicationsOf: (requestId) => standIn.publications.filter((p) => p.args[0] === requestId).length,
    publicationsUnder: (jid) => standIn.publications.filter((p) => p.jid === jid).length,
    dropTokens: () => tokens.clear(),
    returnEvents: true,
    get eventStreams() {
      return streams.size;
    },
    emit,
    dropEventStreams: () => {
      for (const res of streams) res.socket?.destroy();
      streams.clear();
    },
    eventsStatus: undefined,
    close: async () => {
      streams.clear();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return standIn;
}

/** A TCP port on loopback that nothing listens on (bound, then released). */
export async function refusedUrl(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
