import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFileRecordStore } from '../src/file-record-store.js';
import { sweep } from '../src/poll.js';
import { createSaltApiClient } from '../src/salt-api-client.js';
import { seedFleet, startStandInProcess } from './support/fleet.js';

/*
 * The poll sweep at fleet scale (issue 10 targets; issue 12 item 5): N
 * published requests on N minion ids in a file store, a salt-api stand-in in
 * its own process answering every status call `running` after 20 ms, and one
 * sweep() over the whole backlog, twice: the first records `running` on
 * every record, the second sees nothing new (and writes nothing).
 *
 * Per sweep: wall time, master CPU per poll (process.cpuUsage of this process
 * only: user + system, the kernel's share of loopback TCP included) and RSS
 * per outstanding request (peak RSS during the sweep minus RSS before it,
 * sampled every 50 ms). Two designs side by side: one status call per
 * salt-api exchange (batch 1) and several (batch 8, one Salt publication per
 * minion each: no minion sees another's request ids).
 *
 * Default: a smoke run (1 000 requests) that fails only on gross regressions.
 * ODUFLOW_BENCH_FULL=1: 10 000, 50 000 and 100 000, checked against the
 * targets (sweep of 10 000 ≤ 30 s; ≤ 100 µs CPU per poll and ≤ 2 KiB per
 * request at every size). Results: .test-results/bench-poll-sweep.json.
 * The store lives in ODUFLOW_BENCH_DIR (default /dev/shm), as for the
 * file-store bench. Run: npm run bench (after vitest bench) or
 * `node build/poll-sweep.mjs` after bundling (bench/run-poll-sweep.mjs).
 */

const FULL = process.env['ODUFLOW_BENCH_FULL'] === '1';
const SIZES = FULL ? [10_000, 50_000, 100_000] : [1_000];
const BATCHES = [1, 8];
const CALL_DELAY_MS = 20;
const TARGET = { sweep10kS: 30, cpuUsPerPoll: 100, bytesPerRequest: 2048 };
/** Smoke ceilings: about 10× what the reference machine measures, to catch a return to one exchange at a time. */
const SMOKE = { sweepS: 10, cpuUsPerPoll: 2_000 };

interface Row {
  size: number;
  batch: number;
  sweep: 'first' | 'second';
  wallS: number;
  cpuUsPerPoll: number;
  userUsPerPoll: number;
  systemUsPerPoll: number;
  bytesPerRequest: number;
  committed: number;
  polled: number;
}

async function measure(size: number, batch: number, label: Row['sweep'], run: () => Promise<{ polled: number; committed: number }>): Promise<Row> {
  (globalThis as { gc?: () => void }).gc?.();
  const rssBefore = process.memoryUsage.rss();
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 50);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const summary = await run();
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  const polls = Math.max(1, summary.polled);
  return {
    size,
    batch,
    sweep: label,
    wallS,
    cpuUsPerPoll: (cpu.user + cpu.system) / polls,
    userUsPerPoll: cpu.user / polls,
    systemUsPerPoll: cpu.system / polls,
    bytesPerRequest: (peak - rssBefore) / size,
    committed: summary.committed,
    polled: summary.polled,
  };
}

async function benchSize(size: number, batch: number): Promise<Row[]> {
  const base = process.env['ODUFLOW_BENCH_DIR'] ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());
  const dir = mkdtempSync(join(base, 'oduflow-poll-bench-'));
  chmodSync(dir, 0o700);
  const standIn = await startStandInProcess(CALL_DELAY_MS);
  try {
    const root = join(dir, 'store');
    await seedFleet(root, size);
    const passwordFile = join(dir, 'salt-api-password');
    writeFileSync(passwordFile, standIn.password, { mode: 0o600 });
    const store = await createFileRecordStore({ root });
    const salt = createSaltApiClient({ url: standIn.url, username: standIn.username, passwordFile, eauth: 'sharedsecret' });
    const deps = { store, salt, callTimeoutMs: 30_000 };
    const rows: Row[] = [];
    for (const label of ['first', 'second'] as const) rows.push(await measure(size, batch, label, () => sweep(deps, { batchSize: batch })));
    salt.close();
    await store.close();
    return rows;
  } finally {
    await standIn.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function failures(rows: readonly Row[]): string[] {
  const out: string[] = [];
  for (const r of rows) {
    const name = `${r.size} requests, batch ${r.batch}, ${r.sweep} sweep`;
    if (r.polled !== r.size) out.push(`${name}: polled ${r.polled} of ${r.size}`);
    if (r.sweep === 'first' && r.committed !== r.size) out.push(`${name}: committed ${r.committed}, expected every one`);
    if (r.sweep === 'second' && r.committed !== 0) out.push(`${name}: rewrote ${r.committed} unchanged records`);
    if (FULL) {
      if (r.size === 10_000 && r.wallS > TARGET.sweep10kS) out.push(`${name}: ${r.wallS.toFixed(1)} s > ${TARGET.sweep10kS} s`);
      if (r.cpuUsPerPoll > TARGET.cpuUsPerPoll) out.push(`${name}: ${r.cpuUsPerPoll.toFixed(0)} µs CPU per poll > ${TARGET.cpuUsPerPoll} µs`);
      if (r.bytesPerRequest > TARGET.bytesPerRequest) out.push(`${name}: ${r.bytesPerRequest.toFixed(0)} B per request > ${TARGET.bytesPerRequest} B`);
    } else {
      if (r.wallS > SMOKE.sweepS) out.push(`${name}: ${r.wallS.toFixed(1)} s > smoke ceiling ${SMOKE.sweepS} s`);
      if (r.cpuUsPerPoll > SMOKE.cpuUsPerPoll) out.push(`${name}: ${r.cpuUsPerPoll.toFixed(0)} µs CPU per poll > smoke ceiling ${SMOKE.cpuUsPerPoll} µs`);
    }
  }
  return out;
}

const rows: Row[] = [];
for (const size of SIZES) for (const batch of BATCHES) rows.push(...(await benchSize(size, batch)));

console.log(`\npoll sweep (${FULL ? 'full' : 'smoke'}; stand-in answers after ${CALL_DELAY_MS} ms, 64 calls in flight)`);
console.log('  requests  batch  sweep    wall s  CPU µs/poll (user+sys)  RSS B/request');
for (const r of rows) {
  console.log(
    `  ${String(r.size).padStart(8)}  ${String(r.batch).padStart(5)}  ${r.sweep.padEnd(6)} ${r.wallS.toFixed(2).padStart(8)}  ${r.cpuUsPerPoll.toFixed(0).padStart(6)} (${r.userUsPerPoll.toFixed(0)}+${r.systemUsPerPoll.toFixed(0)})`.padEnd(
      64,
    ) + r.bytesPerRequest.toFixed(0).padStart(8),
  );
}
const out = join(process.cwd(), '..', '..', '.test-results');
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'bench-poll-sweep.json'), JSON.stringify({ full: FULL, callDelayMs: CALL_DELAY_MS, rows }, null, 2));
const failed = failures(rows);
if (failed.length > 0) {
  console.error(`\n${failed.length} poll-sweep target(s) missed:`);
  for (const f of failed) console.error(`  - ${f}`);
  process.exit(1);
}
console.log(`all poll-sweep ${FULL ? 'targets' : 'smoke ceilings'} met`);
