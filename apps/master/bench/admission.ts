import autocannon from 'autocannon';
import pg from 'pg';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchMode, stats, writeResult, type ResultRow, type Stats } from '../../../packages/master-runner/bench/support/result.js';
import { startSaltApiStandIn, type SaltApiStandIn } from '../../../packages/master-runner/tests/support/salt-api-standin.js';
import { startPostgres, type PostgresCluster } from '../../../packages/test-harness/src/postgres.js';
import { tokenDigest } from '../src/serve/tokens.js';
import { CLI, cliEnv, runCli } from '../tests/support/cli.js';
import { spawnServe, writeTokensFile } from '../tests/serve/support/serve-process.js';

/*
 * Admission under load (issue 12 item 4): `oduflow-master serve` (the built
 * CLI, a child process) on 127.0.0.1, driven by autocannon with
 * POST /v1/requests: every request a new Idempotency-Key on a minion of its
 * own (one blocking request per target), and a share of replays (an earlier
 * key with the same content, answered from the store with
 * Idempotent-Replayed). Bounded in count (`amount`) and in time (a run is
 * stopped after RUN_CAP_S). Each admission asks the minion's capabilities
 * (the salt-api stand-in in this process answers at once) and commits the
 * record, its key and its outbox entry in one unit; the relay then
 * publishes it (to the stand-in). File store and PostgreSQL store, each in
 * a fresh store per run, on the same filesystem (tmpdir).
 *
 * The floor, in the same run (interleaved): bare single-row INSERT commits
 * from Node to the same PostgreSQL cluster (fsync and synchronous_commit at
 * their defaults, as the store's), as many clients as autocannon has
 * connections, as many commits as admissions.
 */

const MODE = benchMode();
const AMOUNT = MODE === 'smoke' ? 40 : MODE === 'default' ? 600 : 3_000;
const RUNS = Number(process.env['ODUFLOW_BENCH_RUNS'] ?? (MODE === 'smoke' ? 1 : 3));
const DESIGNS = (process.env['ODUFLOW_BENCH_DESIGNS'] ?? 'file,postgres').split(',') as Design[];
/** A directory for a CPU profile of every serve process (NODE_OPTIONS=--cpu-prof), to see where an admission's time goes. */
const SERVE_PROFILE_DIR = process.env['ODUFLOW_BENCH_CPU_PROF'];
const CONNECTIONS = MODE === 'smoke' ? 4 : 16;
const RUN_CAP_S = MODE === 'full' ? 180 : 60;
/** Every REPLAY_EVERY-th request replays the key of the request REPLAY_LAG before it (long done by then). */
const REPLAY_EVERY = 10;
const REPLAY_LAG = Math.min(100, Math.floor(AMOUNT / 4));
const TOKEN = 'odf_bench-admission-00000000000000000000000000000';
const minionOf = (n: number): string => `client-0b7e4c8a-1f2d-4e3c-8a9b-${n.toString(16).padStart(12, '0')}`;

type Design = 'file' | 'postgres';

interface Sample {
  readonly rate: number;
  readonly p50: number;
  readonly p99: number;
}

/** The request i sends: a new key on minion i, or (every REPLAY_EVERY-th) the key and minion of i − REPLAY_LAG. */
function requestFor(i: number): { key: string; minion: string; replay: boolean } {
  const replay = i % REPLAY_EVERY === REPLAY_EVERY - 1 && i >= REPLAY_LAG;
  const n = replay ? i - REPLAY_LAG : i;
  return { key: `bench-${n}`, minion: minionOf(n), replay };
}

function tokensFile(): unknown {
  const minions = Array.from({ length: AMOUNT }, (_, n) => minionOf(n));
  return {
    tenants: { bench: { minions } },
    tokens: [{ id: 'bench', sha256: tokenDigest(TOKEN), tenant: 'bench', actor: 'bench-load', scopes: ['read', 'dispatch'] }],
  };
}

async function load(address: string): Promise<Sample & { readonly statuses: Map<number, number>; readonly sent: number }> {
  let next = 0;
  const statuses = new Map<number, number>();
  let finish: (result: autocannon.Result) => void = () => undefined;
  let fail: (error: unknown) => void = () => undefined;
  const finished = new Promise<autocannon.Result>((resolveRun, rejectRun) => {
    finish = resolveRun;
    fail = rejectRun;
  });
  const instance = autocannon({
    url: address,
    connections: CONNECTIONS,
    pipelining: 1,
    amount: AMOUNT,
    timeout: 30,
    requests: [
      {
        method: 'POST',
        path: '/v1/requests',
        setupRequest: (req) => {
          const { key, minion } = requestFor(next);
          next += 1;
          return {
            ...req,
            headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
            body: JSON.stringify({ minion_id: minion, profile: 'configure' }),
          };
        },
      },
    ],
  }, (error, result) => (error === null || error === undefined ? finish(result) : fail(error)));
  instance.on('response', (_client, statusCode) => statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1));
  const cap = setTimeout(() => instance.stop(), RUN_CAP_S * 1000);
  const result = await finished;
  clearTimeout(cap);
  const done = result.requests.total;
  return { rate: done / Math.max(result.duration, 1e-3), p50: result.latency.p50, p99: result.latency.p99, statuses, sent: next };
}

/** The floor: AMOUNT bare single-row commits from CONNECTIONS clients, each INSERT its own transaction. */
async function commitFloor(cluster: PostgresCluster, run: number): Promise<Sample> {
  const url = await cluster.createDatabase(`floor_${run}`);
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query('CREATE TABLE floor (id text PRIMARY KEY, body jsonb NOT NULL)');
  await setup.end();
  const clients = await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      return c;
    }),
  );
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (c) => {
      while (next < AMOUNT) {
        const i = next;
        next += 1;
        const s = performance.now();
        await c.query('INSERT INTO floor (id, body) VALUES ($1, $2::jsonb)', [`r-${i}`, JSON.stringify({ minion_id: minionOf(i), profile: 'configure', state: 'prepared' })]);
        latencies.push(performance.now() - s);
      }
    }),
  );
  const wallS = (performance.now() - t0) / 1000;
  await Promise.all(clients.map((c) => c.end()));
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  return { rate: AMOUNT / wallS, p50: at(0.5), p99: at(0.99) };
}

interface World {
  readonly dir: string;
  readonly standIn: SaltApiStandIn;
  readonly cluster: PostgresCluster;
  readonly tokens: string;
}

async function serveOnce(world: World, design: Design, run: number): Promise<Sample> {
  const runDir = mkdtempSync(join(world.dir, `${design}-`));
  chmodSync(runDir, 0o700);
  const env: Record<string, string> = {
    ...cliEnv(runDir, world.standIn),
    ODUFLOW_TOKENS_FILE: world.tokens,
    ODUFLOW_CALL_TIMEOUT_MS: '10000',
  };
  if (design === 'postgres') {
    const url = new URL(await world.cluster.createDatabase(`admission_${run}`));
    url.password = '';
    const passwordFile = join(runDir, 'db.password');
    writeFileSync(passwordFile, `${world.cluster.password}\n`, { mode: 0o600 });
    env['ODUFLOW_STORE'] = url.toString();
    env['ODUFLOW_STORE_PASSWORD_FILE'] = passwordFile;
    const migrated = await runCli(['migrate', '--json'], env);
    if (migrated.code !== 0) throw new Error('migrate failed');
  }
  // spawnServe puts its entry first: the profiler's flags go there, the CLI after them.
  const serve = SERVE_PROFILE_DIR === undefined ? spawnServe(env) : spawnServe(env, [], '--cpu-prof', [`--cpu-prof-dir=${SERVE_PROFILE_DIR}`, CLI]);
  try {
    const address = await serve.address;
    const got = await load(address);
    const replays = Array.from({ length: got.sent }, (_, i) => requestFor(i).replay).filter(Boolean).length;
    const accepted = got.statuses.get(202) ?? 0;
    // Every admission and every replay answered 202: anything else measured something other than admission.
    if (accepted !== AMOUNT || replays === 0) {
      throw new Error(`${design}: ${accepted} of ${AMOUNT} answered 202 (${JSON.stringify([...got.statuses])}), ${replays} replays`);
    }
    return got;
  } finally {
    serve.child.kill('SIGTERM');
    await serve.exited;
    rmSync(runDir, { recursive: true, force: true });
  }
}

const DESIGN_NAME: Record<Design, string> = { file: 'file store', postgres: 'PostgreSQL store' };

function rowsFor(design: Design, got: Sample[], floors: Sample[]): ResultRow[] {
  const ratio = (pick: (s: Sample) => number): Stats => stats(got.map((s, i) => pick(s) / pick(floors[i] as Sample)));
  const row = (what: string, unit: string, pick: (s: Sample) => number, higher: boolean): ResultRow => ({
    label: `${DESIGN_NAME[design]}: ${what}`,
    unit,
    value: stats(got.map(pick)),
    floor: stats(floors.map(pick)),
    ratio: ratio(pick),
    higher_is_better: higher,
    runs: got.length,
    target: null,
  });
  return [row('admissions per second', 'req/s', (s) => s.rate, true), row('p50 latency', 'ms', (s) => s.p50, false), row('p99 latency', 'ms', (s) => s.p99, false)];
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'oduflow-admission-bench-'));
  chmodSync(dir, 0o700);
  const standIn = await startSaltApiStandIn({ recordCalls: false });
  const cluster = await startPostgres({ settings: { max_connections: '60' } });
  try {
    const world: World = { dir, standIn, cluster, tokens: writeTokensFile(dir, tokensFile()) };
    const floors: Sample[] = [];
    const samples: Record<Design, Sample[]> = { file: [], postgres: [] };
    for (let run = 0; run < RUNS; run += 1) {
      floors.push(await commitFloor(cluster, run));
      for (const design of DESIGNS) samples[design].push(await serveOnce(world, design, run));
    }
    const rows = DESIGNS.flatMap((design) => rowsFor(design, samples[design], floors));
    for (const r of rows) console.log(`${r.label}: ${r.value.median.toFixed(1)} ${r.unit} (floor ${r.floor?.median.toFixed(1) ?? '-'})`);
    writeResult({
      schema: 1,
      id: 'admission',
      item: 4,
      title: 'Admission under load (POST /v1/requests)',
      method: `oduflow-master serve (the built CLI) on 127.0.0.1 under autocannon: ${AMOUNT} POST /v1/requests per run over ${CONNECTIONS} connections (pipelining 1, capped at ${RUN_CAP_S} s), each a new Idempotency-Key on a minion of its own except every ${REPLAY_EVERY}th, which replays the key of the request ${REPLAY_LAG} before it; the salt-api stand-in answers the capability call at once; a fresh file store (ext4 tmpdir) and a fresh PostgreSQL 15 database per run; ${RUNS} run(s), floor and both stores interleaved run by run.`,
      floor: `${AMOUNT} bare single-row INSERT commits (autocommit) from ${CONNECTIONS} Node clients to the same PostgreSQL cluster with the same durability settings (fsync on, synchronous_commit on).`,
      mode: MODE,
      rows,
      chart: null,
      notes: [
        'No target in the issue: requests/s and p50/p99 are reported against the PostgreSQL commit floor. An admission is a capability exchange with salt-api plus a key claim and a create unit (record, JID, key, outbox entry), then the relay publishes it beside the load.',
        'autocannon, the stand-in, the service and PostgreSQL share the machine’s cores.',
      ],
      ok: true,
    });
  } finally {
    await standIn.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (error) {
  writeResult({
    schema: 1,
    id: 'admission',
    item: 4,
    title: 'Admission under load (POST /v1/requests)',
    method: 'the run failed before it measured both stores',
    floor: 'bare single-row PostgreSQL commits from Node',
    mode: MODE,
    rows: [],
    chart: null,
    notes: [`the run threw ${error instanceof Error ? error.name : 'a non-error'}`],
    ok: false,
  });
  console.error(error);
  process.exitCode = 1;
}
