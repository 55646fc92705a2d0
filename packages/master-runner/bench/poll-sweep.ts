import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeSync, openSync } from 'node:fs';
import { createFileRecordStore } from '../src/file-record-store.js';
import { createMasterLogger } from '../src/logger.js';
import { sweep } from '../src/poll.js';
import type { RecordStore } from '../src/record-store.js';
import { createSaltApiClient } from '../src/salt-api-client.js';
import { bareExchanges, seedFleet, startStandInProcess, type StandInProcess } from './support/fleet.js';
import { seedPostgresFleet, startFleetPostgres, type FleetPostgres } from './support/fleet-postgres.js';
import { benchMode, stats, writeResult, type ResultRow, type Stats } from './support/result.js';

/*
 * The poll sweep at fleet scale (issue 12 item 5): N published requests on N
 * minion ids in a record store, a salt-api stand-in in its own process
 * answering every status call `running` after 20 ms, and one sweep() over
 * the whole backlog, twice: the first records `running` on every record
 * (a write per poll), the second sees nothing new (and writes nothing).
 *
 * Per sweep: wall time, master CPU per poll (process.cpuUsage of this
 * process only: user + system, the kernel's share of loopback TCP included;
 * PostgreSQL's own CPU is its server's, not counted) and RSS per
 * outstanding request (peak RSS during the sweep minus RSS before it,
 * sampled every 20 ms). Two designs, interleaved run by run: the file store
 * (in ODUFLOW_BENCH_DIR, default /dev/shm) and the PostgreSQL store (a
 * throwaway cluster with fsync on), both with 8 status calls per salt-api
 * exchange and 64 calls in flight. The floor, measured in the same run: the
 * same number of status calls as bare keep-alive HTTP exchanges to the same
 * stand-in (8 per exchange, 64 in flight, JSON in and out), no store.
 *
 * Sizes by ODUFLOW_BENCH_MODE: smoke 200 (1 run), default 10 000 (3 runs),
 * full 10 000 / 50 000 / 100 000 (3 runs at 10 000, 2 above). Result:
 * .test-results/bench/poll-sweep.json (bench-contract). Set
 * ODUFLOW_BENCH_CPU_PROF=<dir> to write a CPU profile of every sweep there
 * (the sweep alone, not the seeding); ODUFLOW_BENCH_RUNS and
 * ODUFLOW_BENCH_DESIGNS (file, file-logged, postgres; default
 * file,postgres) narrow or widen a run.
 */

const MODE = benchMode();
const SIZES = MODE === 'smoke' ? [200] : MODE === 'default' ? [10_000] : [10_000, 50_000, 100_000];
const runsFor = (size: number): number => Number(process.env['ODUFLOW_BENCH_RUNS'] ?? (MODE === 'smoke' ? 1 : size > 10_000 ? 2 : 3));
const BATCH = 8;
const CONCURRENCY = 64;
const CALL_DELAY_MS = 20;
const DESIGNS = (process.env['ODUFLOW_BENCH_DESIGNS'] ?? 'file,postgres').split(',') as Design[];
const PROFILE_DIR = process.env['ODUFLOW_BENCH_CPU_PROF'];

/** `file-logged`: the file store with the service's logger (pino, sync, info) writing to /dev/null: what a log line per commit costs. Only when asked for. */
type Design = 'file' | 'file-logged' | 'postgres';
type SweepName = 'first' | 'second';

interface Sample {
  readonly wallS: number;
  readonly cpuUsPerPoll: number;
  readonly userUsPerPoll: number;
  readonly kibPerRequest: number;
  readonly polled: number;
  readonly committed: number;
}

let session: Session | undefined;
async function profiled<T>(name: string, work: () => Promise<T>): Promise<T> {
  if (PROFILE_DIR === undefined) return work();
  if (session === undefined) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
  }
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(PROFILE_DIR, { recursive: true });
    writeFileSync(join(PROFILE_DIR, `${name}.cpuprofile`), JSON.stringify(profile));
  }
}

async function measure(size: number, name: string, run: () => Promise<{ polled: number; committed: number }>): Promise<Sample> {
  (globalThis as { gc?: () => void }).gc?.();
  const rssBefore = process.memoryUsage.rss();
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const summary = await profiled(name, run);
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  const polls = Math.max(1, summary.polled);
  return {
    wallS,
    cpuUsPerPoll: (cpu.user + cpu.system) / polls,
    userUsPerPoll: cpu.user / polls,
    kibPerRequest: (peak - rssBefore) / 1024 / size,
    polled: summary.polled,
    committed: summary.committed,
  };
}

interface Context {
  readonly base: string;
  readonly standIn: StandInProcess;
  readonly passwordFile: string;
  postgres?: FleetPostgres;
}

async function openStore(ctx: Context, design: Design, size: number, run: number): Promise<{ store: RecordStore; dispose: () => Promise<void> }> {
  if (design !== 'postgres') {
    const dir = mkdtempSync(join(ctx.base, 'oduflow-poll-bench-'));
    chmodSync(dir, 0o700);
    const root = join(dir, 'store');
    await seedFleet(root, size);
    const store = await createFileRecordStore({ root });
    const dispose = async (): Promise<void> => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    };
    return { store, dispose };
  }
  ctx.postgres ??= await startFleetPostgres();
  const store = await seedPostgresFleet(ctx.postgres, `sweep_${size}_${run}`, size);
  return { store, dispose: () => store.close() };
}

async function sweepsOf(ctx: Context, design: Design, size: number, run: number): Promise<Record<SweepName, Sample>> {
  const { store, dispose } = await openStore(ctx, design, size, run);
  const salt = createSaltApiClient({ url: ctx.standIn.url, username: ctx.standIn.username, passwordFile: ctx.passwordFile, eauth: 'sharedsecret' });
  const logFd = design === 'file-logged' ? openSync('/dev/null', 'w') : undefined;
  try {
    const deps = { store, salt, callTimeoutMs: 30_000, ...(logFd === undefined ? {} : { logger: createMasterLogger({ fd: logFd }) }) };
    const once = (name: SweepName) => measure(size, `${design}-${size}-${run}-${name}`, () => sweep(deps, { batchSize: BATCH, concurrency: CONCURRENCY }));
    const first = await once('first');
    const second = await once('second');
    check(design, size, first, second);
    return { first, second };
  } finally {
    salt.close();
    await dispose();
    if (logFd !== undefined) closeSync(logFd);
  }
}

/** A sweep that polled fewer records than there are, or wrote when nothing changed, measured something else. */
function check(design: Design, size: number, first: Sample, second: Sample): void {
  if (first.polled !== size || second.polled !== size) throw new Error(`${design} ${size}: a sweep polled ${first.polled}/${second.polled} of ${size}`);
  if (first.committed !== size) throw new Error(`${design} ${size}: the first sweep committed ${first.committed} of ${size}`);
  if (second.committed !== 0) throw new Error(`${design} ${size}: the second sweep rewrote ${second.committed} unchanged records`);
}

const DESIGN_NAME: Record<Design, string> = { file: 'file store', 'file-logged': 'file store with the service logger', postgres: 'PostgreSQL store' };
const SWEEP_NAME: Record<SweepName, string> = { first: 'first sweep (writes every record)', second: 'second sweep (nothing new)' };
const fmt = (n: number): string => n.toLocaleString('en-US');

async function main(): Promise<void> {
  const base = process.env['ODUFLOW_BENCH_DIR'] ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());
  const secrets = mkdtempSync(join(base, 'oduflow-poll-bench-secret-'));
  chmodSync(secrets, 0o700);
  const standIn = await startStandInProcess(CALL_DELAY_MS);
  const passwordFile = join(secrets, 'salt-api-password');
  writeFileSync(passwordFile, standIn.password, { mode: 0o600 });
  const ctx: Context = { base, standIn, passwordFile };
  const rows: ResultRow[] = [];
  const series = new Map<string, [number, number][]>();
  const point = (name: string, x: number, y: number) => series.set(name, [...(series.get(name) ?? []), [x, y]]);
  const notes: string[] = [];
  try {
    for (const size of SIZES) {
      const samples = new Map<string, Sample[]>();
      const floors: Sample[] = [];
      const add = (key: string, s: Sample) => samples.set(key, [...(samples.get(key) ?? []), s]);
      for (let run = 0; run < runsFor(size); run += 1) {
        // Interleaved: the floor and each design once per run, so a slow minute of the machine hits them all.
        floors.push(await measure(size, `floor-${size}-${run}`, () => bareExchanges(standIn, size, BATCH, CONCURRENCY)));
        for (const design of DESIGNS) {
          const { first, second } = await sweepsOf(ctx, design, size, run);
          add(`${design}/first`, first);
          add(`${design}/second`, second);
        }
      }
      const floorWall = stats(floors.map((f) => f.wallS));
      const floorCpu = stats(floors.map((f) => f.cpuUsPerPoll));
      for (const design of DESIGNS) {
        for (const name of ['first', 'second'] as const) {
          const got = samples.get(`${design}/${name}`) ?? [];
          const label = `${fmt(size)} requests, ${DESIGN_NAME[design]}, ${SWEEP_NAME[name]}`;
          const wall = stats(got.map((s) => s.wallS));
          const cpu = stats(got.map((s) => s.cpuUsPerPoll));
          const ratio = (values: number[], floor: number[]): Stats => stats(values.map((v, i) => v / (floor[i] ?? Number.NaN)));
          rows.push({
            label: `${label}: wall`,
            unit: 's',
            value: wall,
            floor: floorWall,
            ratio: ratio(got.map((s) => s.wallS), floors.map((f) => f.wallS)),
            higher_is_better: false,
            runs: got.length,
            target: size === 10_000 ? { kind: 'value_max', value: 30 } : null,
          });
          rows.push({
            label: `${label}: master CPU per poll`,
            unit: 'µs/poll',
            value: cpu,
            floor: floorCpu,
            ratio: ratio(got.map((s) => s.cpuUsPerPoll), floors.map((f) => f.cpuUsPerPoll)),
            higher_is_better: false,
            runs: got.length,
            target: { kind: 'value_max', value: 100 },
          });
          rows.push({
            label: `${label}: RSS per outstanding request`,
            unit: 'KiB/request',
            value: stats(got.map((s) => s.kibPerRequest)),
            floor: null,
            ratio: null,
            higher_is_better: false,
            runs: got.length,
            target: { kind: 'value_max', value: 2 },
          });
          point(`${DESIGN_NAME[design]}, ${name} sweep: s`, size, wall.median);
          point(`${DESIGN_NAME[design]}, ${name} sweep: CPU µs/poll`, size, cpu.median);
          const user = stats(got.map((s) => s.userUsPerPoll)).median;
          console.log(
            `${label}: ${wall.median.toFixed(2)} s, ${cpu.median.toFixed(0)} µs/poll (user ${user.toFixed(0)}), ${stats(got.map((s) => s.kibPerRequest)).median.toFixed(2)} KiB/request`,
          );
        }
      }
      point('floor (bare exchanges): s', size, floorWall.median);
      point('floor (bare exchanges): CPU µs/poll', size, floorCpu.median);
      console.log(`${fmt(size)} requests, floor: ${floorWall.median.toFixed(2)} s, ${floorCpu.median.toFixed(0)} µs/poll`);
    }
    notes.push(
      `The stand-in answers every status call after ${CALL_DELAY_MS} ms and runs the calls of one exchange one after another (as salt-api does), so ${CONCURRENCY} calls in flight bound a sweep of N to about N / ${CONCURRENCY} × ${CALL_DELAY_MS} ms: the floor's wall time.`,
      'CPU per poll is this process only (user + system); the PostgreSQL server and the stand-in run in their own processes and are not counted.',
    );
    writeResult({
      schema: 1,
      id: 'poll-sweep',
      item: 5,
      title: 'Poll sweep at fleet scale',
      method: `N published requests on N minion ids; a salt-api stand-in in its own process answers every oduflow_job.status after ${CALL_DELAY_MS} ms; sweep() twice over the backlog (the first writes running on every record, the second finds nothing new), ${BATCH} calls per exchange, ${CONCURRENCY} in flight, file store on tmpfs and PostgreSQL 15 (fsync on) interleaved with the floor run by run; sizes ${SIZES.map(fmt).join(', ')}; master CPU from process.cpuUsage, RSS as peak during the sweep minus before it, per request.`,
      floor: `The same number of status calls as bare keep-alive HTTP exchanges to the same stand-in (${BATCH} calls per exchange, ${CONCURRENCY} in flight, JSON encode and parse), no store and no validation.`,
      mode: MODE,
      rows,
      chart: {
        kind: 'lines',
        x_label: 'unresolved requests',
        y_label: 'sweep s / master CPU µs per poll',
        series: [...series].map(([name, points]) => ({ name, points })),
        target_line: 30,
      },
      notes,
      ok: true,
    });
  } finally {
    await standIn.stop();
    await ctx.postgres?.stop();
    rmSync(secrets, { recursive: true, force: true });
    if (session !== undefined) session.disconnect();
  }
}

try {
  await main();
} catch (error) {
  // A broken run still leaves a result saying so; its message may carry paths, so only the kind goes in.
  writeResult({
    schema: 1,
    id: 'poll-sweep',
    item: 5,
    title: 'Poll sweep at fleet scale',
    method: 'the run failed before it measured every size',
    floor: 'bare keep-alive HTTP exchanges to the same stand-in',
    mode: MODE,
    rows: [],
    chart: null,
    notes: [`the run threw ${error instanceof Error ? error.name : 'a non-error'}`],
    ok: false,
  });
  console.error(error);
  process.exitCode = 1;
}
