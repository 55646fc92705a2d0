import { applyEvent, createRequestRecord, type ProtocolRequestRecord } from '@oduflow/protocol';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import { migrateFileRecordStore } from '../../src/migrate-store.js';
import { encodeRecord } from '../../src/record-codec.js';

/*
 * A fleet's backlog for the poll-sweep bench: N published requests, each on
 * its own minion id, in a file store; and a salt-api stand-in in a process of
 * its own (so process.cpuUsage() of the bench process is the master's alone).
 *
 * Seeding writes records, JIDs and target entries in the layout of the release
 * before the format marker (no fsync), then runs the real migrateFileRecordStore,
 * which adds the unresolved index and the marker as an upgrade would (the same
 * route as file-store.bench.ts).
 */

const AT = '2026-11-29T10:00:00.000Z';
/** The package directory: the nearest parent with a package.json (this file may run bundled from build/). */
function findPackageDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = resolve(dir, '..');
    if (parent === dir) throw new Error('no package.json above the bench');
    dir = parent;
  }
  return dir;
}
const packageDir = findPackageDir();

const fleetMinion = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;
const fleetRequest = (n: number): string => `6f1c2b8e-4d3a-4b5c-9e7f-${n.toString(16).padStart(12, '0')}`;
const fleetJid = (n: number): string => (20261129100000000000n + BigInt(n)).toString();

export function publishedRecord(n: number): ProtocolRequestRecord {
  const record = createRequestRecord({ request_id: fleetRequest(n), minion_id: fleetMinion(n), profile: 'configure', state_digest: '', jid: fleetJid(n), at: AT });
  return applyEvent(applyEvent(record, { type: 'intent_recorded', at: AT }), { type: 'publish_acked', at: AT }) as ProtocolRequestRecord;
}

function writePrivate(path: string, value: unknown): void {
  writeFileSync(path, JSON.stringify(value), { mode: 0o600 });
}

/** A file store at `root` holding `size` published requests on as many minions. */
export async function seedFleet(root: string, size: number): Promise<void> {
  for (const sub of ['', 'requests', 'jids', 'locks', 'targets']) mkdirSync(join(root, sub), { mode: 0o700 });
  chmodSync(root, 0o700);
  for (let n = 0; n < size; n += 1) {
    const record = publishedRecord(n);
    const entry = { request_id: record.request_id, minion_id: record.minion_id };
    mkdirSync(join(root, 'targets', record.minion_id), { mode: 0o700 });
    writePrivate(join(root, 'jids', `${record.jid}.json`), entry);
    writePrivate(join(root, 'targets', record.minion_id, `${record.request_id}.json`), entry);
    writePrivate(join(root, 'requests', `${record.request_id}.json`), encodeRecord(record));
  }
  const report = await migrateFileRecordStore({ root });
  if (report.unresolved !== size) throw new Error(`seeded ${report.unresolved} unresolved requests, expected ${size}`);
}

export interface StandInProcess {
  readonly url: string;
  readonly username: string;
  readonly password: string;
  stop(): Promise<void>;
  readonly child: ChildProcess;
}

function childBundle(): string {
  const outfile = join(packageDir, 'build', 'standin-child.mjs');
  mkdirSync(dirname(outfile), { recursive: true });
  const result = buildSync({
    entryPoints: [join(packageDir, 'bench', 'support', 'standin-child.ts')],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    logLevel: 'error',
  });
  writeFileSync(outfile, result.outputFiles[0]?.contents ?? '');
  return outfile;
}

/** Starts the stand-in in its own Node process; every status call is answered `running` after `callDelayMs`. */
export async function startStandInProcess(callDelayMs: number, deadlineMs = 20_000): Promise<StandInProcess> {
  const child = spawn(process.execPath, [childBundle(), String(callDelayMs)], { cwd: packageDir, stdio: ['pipe', 'pipe', 'inherit'] });
  const ready = await new Promise<{ url: string; username: string; password: string }>((resolveReady, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('the stand-in did not start before the deadline')), deadlineMs);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const line = out.split('\n')[0];
      if (out.includes('\n') && line !== undefined) {
        clearTimeout(timer);
        resolveReady(JSON.parse(line) as { url: string; username: string; password: string });
      }
    });
    child.once('exit', (code) => reject(new Error(`the stand-in exited early (${String(code)})`)));
  });
  return {
    ...ready,
    child,
    stop: async () => {
      const exited = new Promise<void>((done) => child.once('exit', () => done()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

function post(agent: Agent, url: URL, headers: Record<string, string>, body: string): Promise<unknown> {
  return new Promise((resolvePost, reject) => {
    const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', accept: 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        try {
          resolvePost(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        } catch (error) {
          reject(error instanceof Error ? error : new Error('unparseable answer'));
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The poll sweep's floor: `size` status calls to the stand-in as bare
 * keep-alive HTTP exchanges, `batch` lowstate chunks per exchange and
 * `concurrency` exchanges in flight (as sweep() keeps them), the bodies encoded and the answers parsed, nothing validated or
 * stored. Returns what sweep() returns, so the bench measures both alike.
 */
export async function bareExchanges(standIn: StandInProcess, size: number, batch: number, concurrency: number): Promise<{ polled: number; committed: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  try {
    const base = new URL(standIn.url);
    const login = (await post(agent, new URL('/login', base), {}, JSON.stringify({ username: standIn.username, password: standIn.password, eauth: 'sharedsecret' }))) as {
      return: { token: string }[];
    };
    const token = login.return[0]?.token ?? '';
    let next = 0;
    let polled = 0;
    const worker = async (): Promise<void> => {
      while (next < size) {
        const from = next;
        next = Math.min(size, next + batch);
        const chunks = [];
        for (let n = from; n < next; n += 1) {
          const record = publishedRecord(n);
          const args = [record.request_id, record.jid, record.profile, record.state_digest];
          chunks.push({ client: 'local', tgt: [record.minion_id], tgt_type: 'list', fun: 'oduflow_job.status', arg: args, timeout: 30 });
        }
        const answer = (await post(agent, new URL('/', base), { 'x-auth-token': token }, JSON.stringify(chunks))) as { return: unknown[] };
        polled += answer.return.length;
      }
    };
    // As sweep(): `concurrency` workers, each with one exchange of `batch` calls in flight.
    await Promise.all(Array.from({ length: concurrency }, worker));
    return { polled, committed: 0 };
  } finally {
    agent.destroy();
  }
}
