/**
 * The `npm run demo` scenario: a real local Salt topology (salt-master,
 * salt-api, two minions) driven by the real `oduflow-master` CLI, run as child
 * processes with `--json`. Three short stories, each printed as narration plus
 * a table of evidence, each checked: the demo doubles as a smoke test.
 *
 *   1. configure on minion A → succeeded 5/5, the minion's 9-field receipt, applied once.
 *   2. Lost publication: volume_resize on B, the salt-master SIGKILLed mid-state;
 *      the minion commits its receipt anyway; after a restart `poll` recovers it.
 *   3. volume_resize on A, its job worker SIGKILLed mid-state → unknown (exit 3);
 *      A is blocked (exit 2) until an operator reconciles; then configure succeeds.
 *
 * The pure helpers (ASCII table, short ids, receipt shape) are exported for tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { ROLE_MARKERS, startTopology, type Topology } from './topology.js';

// ---------------------------------------------------------------- pure helpers

export type Cell = string | number | null | undefined;

/** A plain-ASCII table (`+---+` borders), left-aligned, `-` for empty cells. */
export function asciiTable(head: readonly string[], rows: readonly (readonly Cell[])[], indent = ''): string {
  const text = (cell: Cell) => (cell === null || cell === undefined || cell === '' ? '-' : String(cell));
  const body = rows.map((row) => head.map((_, i) => text(row[i])));
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => (row[i] as string).length)));
  const rule = `${indent}+${widths.map((w) => '-'.repeat(w + 2)).join('+')}+`;
  const line = (cells: readonly string[]) => `${indent}| ${cells.map((c, i) => c.padEnd(widths[i] as number)).join(' | ')} |`;
  return [rule, line(head), rule, ...body.map(line), rule].join('\n');
}

/** A value for narration: a string as it is, `fallback` for null or undefined, anything else inspected. */
function textOf(value: unknown, fallback: string): string {
  if (value === null || value === undefined) return fallback;
  return typeof value === 'string' ? value : inspect(value);
}

/** The first block of a UUID (or of the UUID in `client-<uuid>`): enough to tell requests apart in a demo. */
export function shortId(id: string | null | undefined): string {
  if (id === null || id === undefined || id === '') return '-';
  const uuid = id.startsWith('client-') ? id.slice('client-'.length) : id;
  return uuid.split('-')[0] ?? uuid;
}

/** `passed/total`, or `-` when the record carries no counts. */
export function counts(passed: number | null | undefined, total: number | null | undefined): string {
  return typeof passed === 'number' && typeof total === 'number' ? `${passed}/${total}` : '-';
}

/** Seconds with one decimal: `12.3 s`. */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** The exact key set of a protocol-1 receipt: nothing else may ever leave the minion. */
export const RECEIPT_KEYS = Object.freeze(
  ['jid', 'minion_id', 'passed', 'profile', 'protocol', 'request_id', 'state_digest', 'status', 'total'] as const,
);

/** True when `value` is an object with exactly the receipt keys (any order). */
export function hasReceiptShape(value: unknown): value is Record<(typeof RECEIPT_KEYS)[number], unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const keys = Object.keys(value).sort();
  return keys.length === RECEIPT_KEYS.length && keys.every((k, i) => k === RECEIPT_KEYS[i]);
}

/** One row of the evidence table. */
export interface EvidenceRow {
  command: string;
  request: string;
  minion: string;
  profile: string;
  jid: string;
  state: string;
  counts: string;
  marker: string;
  exit: number | string;
}

const EVIDENCE_HEAD = ['command', 'request', 'minion', 'profile', 'jid', 'state', 'passed', 'marker', 'exit'] as const;

export function evidenceTable(rows: readonly EvidenceRow[], indent = '  '): string {
  return asciiTable(
    EVIDENCE_HEAD,
    rows.map((r) => [r.command, r.request, r.minion, r.profile, r.jid, r.state, r.counts, r.marker, r.exit]),
    indent,
  );
}

// ---------------------------------------------------------------- the CLI, as a child process

/** A record row as `oduflow-master --json` prints it (list/dispatch/poll rows; show/reconcile `record`). */
interface CliRecord {
  request_id: string;
  minion_id: string | null;
  profile: string | null;
  jid: string | null;
  state: string;
  passed: number | null;
  total: number | null;
  reason: string | null;
  updated_at: string | null;
  outcome?: string;
  observed?: string | null;
  [field: string]: unknown;
}

interface CliError {
  code: string;
  detail: string | null;
  request_id: string | null;
  message: string;
}

export interface CliResult {
  argv: string[];
  exit: number;
  json: { outcome?: string; reason?: string | null; records?: CliRecord[]; record?: CliRecord; error?: CliError } | null;
  stdout: string;
  stderr: string;
}

/** The last non-empty line of stdout parsed as JSON (the CLI prints one), or null. */
export function parseCliJson(stdout: string): CliResult['json'] {
  const line = stdout.split('\n').filter((l) => l.trim() !== '').pop();
  if (line === undefined) return null;
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

/** Finds `apps/master/dist/cli.js` walking up from this file (dist/ or src/ of test-harness). */
export function findMasterCli(from: string = dirname(fileURLToPath(import.meta.url))): string | null {
  for (let dir = resolve(from); ; dir = dirname(dir)) {
    const candidate = join(dir, 'apps', 'master', 'dist', 'cli.js');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return null;
  }
}

// ---------------------------------------------------------------- the scenario

class DemoFailure extends Error {
  override readonly name = 'DemoFailure';
}

export interface DemoOptions {
  /** Where narration goes (default stdout). */
  out?: (text: string) => void;
  /** Path of `oduflow-master`'s dist/cli.js (default: found from this package, or $ODUFLOW_MASTER_CLI). */
  masterCli?: string;
  /** Seconds the volume_resize role sleeps (default 5): long enough to kill reliably, short enough for a demo. */
  slowStateSeconds?: number;
}

export interface DemoSession {
  /** Runs the whole scenario and tears down; resolves true when every check held. Never rejects. */
  run(): Promise<boolean>;
  /**
   * For signal handlers: stops the scenario, kills running CLI children and
   * the topology (waiting for one still starting), removes the demo's
   * directory. Idempotent.
   */
  interrupt(): Promise<void>;
  /** The demo's private directory (topology + record store), once created. */
  readonly dir: string | null;
}

const CLI_TIMEOUT_MS = 90_000;
const WAIT_MS = 30_000;

export function createDemo(options: DemoOptions = {}): DemoSession {
  const out = options.out ?? ((text: string) => void process.stdout.write(text));
  const say = (line = '') => out(`${line}\n`);
  const slow = options.slowStateSeconds ?? 5;
  const masterCli = options.masterCli ?? process.env['ODUFLOW_MASTER_CLI'] ?? findMasterCli();

  let dir: string | null = null;
  let topo: Topology | null = null;
  let starting: Promise<Topology> | null = null;
  let interrupted = false;
  let storeDir = '';
  const children = new Set<ChildProcess>();
  let cliCalls = 0;
  let checks = 0;
  let lastCli: CliResult | null = null;
  let tornDown: Promise<void> | null = null;
  /** The evidence of the story in progress (printed if it fails). */
  let openRows: EvidenceRow[] | null = null;

  const label = new Map<string, string>();
  const minionLabel = (id: string | null | undefined) => (id == null ? '-' : `${label.get(id) ?? '?'} ${shortId(id)}`);

  const check = (ok: boolean, what: string): void => {
    if (!ok) throw new DemoFailure(what);
    checks += 1;
  };

  /** Throws once the demo was interrupted, so the scenario never touches a topology being torn down. */
  const live = () => {
    if (interrupted) throw new DemoFailure('interrupted');
  };

  const cli = (args: string[]): Promise<CliResult> => {
    live();
    if (topo === null) throw new Error('demo: no topology');
    const t = topo;
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('ODUFLOW_')) env[k] = v;
    Object.assign(env, {
      ODUFLOW_STORE: storeDir,
      ODUFLOW_SALT_API_URL: t.saltApiUrl,
      ODUFLOW_SALT_API_USER: t.username,
      ODUFLOW_SALT_API_PASSWORD_FILE: t.passwordFile,
      ODUFLOW_SALT_API_EAUTH: t.eauth,
      ODUFLOW_CALL_TIMEOUT_MS: '15000',
      ODUFLOW_LOG_LEVEL: 'warn',
      FORCE_COLOR: '0',
    });
    const argv = [...args, '--json'];
    cliCalls += 1;
    return new Promise((resolvePromise, reject) => {
      const child = spawn(process.execPath, [masterCli as string, ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      children.add(child);
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      const timer = setTimeout(() => child.kill('SIGKILL'), CLI_TIMEOUT_MS);
      child.once('error', (error) => {
        clearTimeout(timer);
        children.delete(child);
        reject(error);
      });
      child.once('close', (code, sig) => {
        clearTimeout(timer);
        children.delete(child);
        const result: CliResult = { argv, exit: code ?? (sig === null ? -1 : 128), json: parseCliJson(stdout), stdout, stderr };
        lastCli = result;
        if (sig !== null) {
          reject(new DemoFailure(`oduflow-master ${args[0]} was killed by ${sig} (timed out after ${seconds(CLI_TIMEOUT_MS)}?)`));
        } else {
          resolvePromise(result);
        }
      });
    });
  };

  const waitUntil = async (what: string, probe: () => boolean | Promise<boolean>, timeoutMs = WAIT_MS): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      live();
      if (await probe()) return;
      if (Date.now() > deadline) throw new DemoFailure(`timed out after ${seconds(timeoutMs)} waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const roleLines = (minion: string, profile: keyof typeof ROLE_MARKERS) =>
    (topo as Topology).markerLines(minion).filter((l) => l === ROLE_MARKERS[profile]).length;

  const receiptPath = (minion: string, requestId: string) => join((topo as Topology).receiptDir(minion), 'requests', `${requestId}.json`);
  const readReceipt = (minion: string, requestId: string): Record<string, unknown> | null => {
    try {
      return JSON.parse(readFileSync(receiptPath(minion, requestId), 'utf8')) as Record<string, unknown>;
    } catch {
      return null;
    }
  };

  /** The single record of a dispatch/poll answer, or the `record` of show/reconcile. */
  const recordOf = (r: CliResult): CliRecord | null => r.json?.record ?? r.json?.records?.[0] ?? null;

  const row = (command: string, r: CliResult, marker: number | string, fallback: Partial<EvidenceRow> = {}): EvidenceRow => {
    const rec = recordOf(r);
    const error = r.json?.error;
    return {
      command,
      request: shortId(rec?.request_id ?? fallback.request),
      minion: rec ? minionLabel(rec.minion_id) : (fallback.minion ?? '-'),
      profile: rec?.profile ?? fallback.profile ?? '-',
      jid: rec?.jid ?? '-',
      state: error ? error.code : (rec?.state ?? '-'),
      counts: rec ? counts(rec.passed, rec.total) : '-',
      marker: String(marker),
      exit: r.exit,
    };
  };

  const cmdLine = (args: string[]) =>
    `oduflow-master ${args.map((a) => (label.has(a) ? `<${label.get(a)}>` : /\s/.test(a) ? JSON.stringify(a) : a)).join(' ')}`;

  /** Runs the CLI, narrates the call in one line, and checks the exit code. */
  const step = async (args: string[], expectExit: number, summary: (r: CliResult) => string): Promise<CliResult> => {
    const r = await cli(args);
    say(`  $ ${cmdLine(args)}`);
    say(`      exit ${r.exit}: ${summary(r)}`);
    check(r.exit === expectExit, `${cmdLine(args)} exited ${r.exit}, expected ${expectExit}${describeError(r)}`);
    return r;
  };
  const describeError = (r: CliResult) => (r.json?.error ? ` (${r.json.error.code}: ${r.json.error.message})` : '');

  const dispatchedSummary = (r: CliResult) => {
    const rec = recordOf(r);
    if (r.json?.error) return `refused, ${r.json.error.code}${r.json.error.detail ? `/${r.json.error.detail}` : ''}: ${r.json.error.message}`;
    return `${r.json?.outcome ?? '?'}, request ${shortId(rec?.request_id)}, JID ${rec?.jid ?? '-'}`;
  };
  const recordSummary = (r: CliResult) => {
    const rec = recordOf(r);
    if (r.json?.error) return `${r.json.error.code}: ${r.json.error.message}`;
    if (!rec) return 'no record in the answer';
    const observed = rec.observed ? `minion said ${rec.observed}, ` : '';
    const reason = rec.reason ? ` (${rec.reason})` : '';
    return `${observed}record ${rec.state} ${counts(rec.passed, rec.total)}${reason}`;
  };

  const showReceipt = (minion: string, requestId: string, receipt: Record<string, unknown>) => {
    say(`  receipt on minion ${label.get(minion)} (receipts/requests/${shortId(requestId)}....json, ${Object.keys(receipt).length} fields):`);
    say(`      ${JSON.stringify(receipt)}`);
  };

  /** The receipt file matches the master's record exactly (binding and counts). */
  const checkReceiptMatches = (minion: string, rec: CliRecord, receipt: Record<string, unknown> | null) => {
    check(receipt !== null, `no receipt file on minion ${label.get(minion)} for request ${rec.request_id}`);
    check(hasReceiptShape(receipt), `the receipt has other fields than the 9 of protocol 1: ${JSON.stringify(receipt)}`);
    const r = receipt as Record<string, unknown>;
    const same =
      r['protocol'] === 1 &&
      r['minion_id'] === rec.minion_id &&
      r['request_id'] === rec.request_id &&
      r['jid'] === rec.jid &&
      r['profile'] === rec.profile &&
      r['state_digest'] === '' &&
      r['status'] === rec.state &&
      r['passed'] === rec.passed &&
      r['total'] === rec.total;
    check(same, `the master's record ${JSON.stringify(rec)} does not match the minion's receipt ${JSON.stringify(r)}`);
  };

  const heading = (n: number, text: string) => {
    say();
    say(`== ${n}/3  ${text}`);
  };
  const outcome = (started: number, rows: EvidenceRow[], text: string) => {
    openRows = null;
    say(evidenceTable(rows));
    say(`  => ${text} (${seconds(Date.now() - started)})`);
  };

  // --- 1. configure on A succeeds
  const storyConfigure = async (a: string) => {
    const started = Date.now();
    heading(1, 'configure on minion A: applied once, proven by a minimal receipt on the minion');
    const rows: EvidenceRow[] = (openRows = []);
    const before = roleLines(a, 'configure');
    const d = await step(['dispatch', '--minion', a, '--profile', 'configure'], 0, dispatchedSummary);
    const rec = recordOf(d);
    check(d.json?.outcome === 'published' && rec !== null, `dispatch did not publish: ${d.stdout.trim()}`);
    const id = (rec as CliRecord).request_id;
    rows.push(row('dispatch', d, roleLines(a, 'configure') - before));
    const p = await step(['poll', '--request-id', id, '--watch', '--interval', '500'], 0, recordSummary);
    const polled = recordOf(p);
    rows.push(row('poll', p, roleLines(a, 'configure') - before));
    check(polled?.state === 'succeeded' && polled.passed === 5 && polled.total === 5, `expected succeeded 5/5, got ${recordSummary(p)}`);
    const receipt = readReceipt(a, id);
    if (receipt) showReceipt(a, id, receipt);
    checkReceiptMatches(a, polled as CliRecord, receipt);
    const ran = roleLines(a, 'configure') - before;
    say(`  marker on minion A: ${ran} new line "${ROLE_MARKERS.configure}"`);
    check(ran === 1, `the configure role ran ${ran} times, expected exactly 1`);
    outcome(started, rows, 'succeeded 5/5; the receipt is bound to the JID and holds the 9 protocol fields only; applied once');
  };

  // --- 2. lost publication on B
  const storyLostPublication = async (b: string) => {
    const t = topo as Topology;
    const started = Date.now();
    heading(2, 'lost publication: the salt-master dies while minion B runs volume_resize');
    const rows: EvidenceRow[] = (openRows = []);
    const before = roleLines(b, 'volume_resize');
    const d = await step(['dispatch', '--minion', b, '--profile', 'volume_resize'], 0, dispatchedSummary);
    const rec = recordOf(d);
    check(d.json?.outcome === 'published' && rec !== null, `dispatch did not publish: ${d.stdout.trim()}`);
    const id = (rec as CliRecord).request_id;
    rows.push(row('dispatch', d, roleLines(b, 'volume_resize') - before));
    await waitUntil('minion B to start the volume_resize state (its marker line)', () => roleLines(b, 'volume_resize') > before);
    await t.stopMaster('SIGKILL');
    const killedAt = Date.now();
    say(`  minion B started the state (marker line written); salt-master SIGKILLed: the return has nowhere to go`);
    await waitUntil(
      'minion B to commit its receipt',
      () => {
        const status = readReceipt(b, id)?.['status'];
        return status === 'succeeded' || status === 'failed' || status === 'unknown';
      },
      WAIT_MS + slow * 1000,
    );
    const receipt = readReceipt(b, id) as Record<string, unknown>;
    say(`  ${seconds(Date.now() - killedAt)} later, with the master still down, minion B has committed its receipt:`);
    showReceipt(b, id, receipt);
    check(hasReceiptShape(receipt) && receipt['status'] === 'succeeded', `expected a succeeded receipt on B, got ${JSON.stringify(receipt)}`);
    const s = await step(['show', id], 0, (r) => `the master still records ${recordOf(r)?.state ?? '?'}: it never saw the return`);
    rows.push(row('show', s, roleLines(b, 'volume_resize') - before));
    check(recordOf(s)?.state === 'published', `expected the master's record to stay published, got ${recordOf(s)?.state}`);
    const restartAt = Date.now();
    live();
    await t.startMaster();
    say(`  salt-master restarted (${seconds(Date.now() - restartAt)}); nothing is published again, poll asks B for the receipt`);
    const p = await step(['poll', '--request-id', id], 0, recordSummary);
    const polled = recordOf(p);
    rows.push(row('poll', p, roleLines(b, 'volume_resize') - before));
    check(polled?.state === 'succeeded' && polled.passed === 3 && polled.total === 3, `expected succeeded 3/3, got ${recordSummary(p)}`);
    checkReceiptMatches(b, polled as CliRecord, readReceipt(b, id));
    check(JSON.stringify(readReceipt(b, id)) === JSON.stringify(receipt), 'the receipt changed after the poll');
    const ran = roleLines(b, 'volume_resize') - before;
    check(ran === 1, `the volume_resize role ran ${ran} times on B, expected exactly 1`);
    outcome(started, rows, 'poll recovered the exact receipt (succeeded 3/3) after the return was lost; applied once');
  };

  // --- 3. unknown on A blocks until reconciled
  const storyUnknown = async (a: string) => {
    const t = topo as Topology;
    const started = Date.now();
    heading(3, "unknown: minion A's job worker is killed mid-state; A stays blocked until an operator reconciles");
    const rows: EvidenceRow[] = (openRows = []);
    const before = roleLines(a, 'volume_resize');
    const d = await step(['dispatch', '--minion', a, '--profile', 'volume_resize'], 0, dispatchedSummary);
    const rec = recordOf(d);
    check(d.json?.outcome === 'published' && rec !== null, `dispatch did not publish: ${d.stdout.trim()}`);
    const id = (rec as CliRecord).request_id;
    const jid = (rec as CliRecord).jid;
    rows.push(row('dispatch', d, roleLines(a, 'volume_resize') - before));
    await waitUntil('minion A to start the volume_resize state (its marker line)', () => roleLines(a, 'volume_resize') > before);
    const worker = (await t.jobWorkers(a)).find((w) => w.jid === jid);
    check(worker !== undefined, `no job worker of JID ${jid} on minion A`);
    live();
    process.kill((worker as { pid: number }).pid, 'SIGKILL');
    await waitUntil('the job worker to die', async () => !(await t.jobWorkerPids(a)).includes((worker as { pid: number }).pid), 10_000);
    say(`  minion A started the state; its job worker (pid ${(worker as { pid: number }).pid}, JID ${jid}) SIGKILLed mid-state`);
    const claim = readReceipt(a, id);
    if (claim) say(`  minion A's request file holds only the claim: status "${String(claim['status'])}", and no live worker holds its lock`);
    const p = await step(['poll', '--request-id', id], 3, recordSummary);
    rows.push(row('poll', p, roleLines(a, 'volume_resize') - before));
    check(recordOf(p)?.state === 'unknown', `expected unknown, got ${recordSummary(p)}`);
    const configureBefore = roleLines(a, 'configure');
    const refused = await step(['dispatch', '--minion', a, '--profile', 'configure'], 2, dispatchedSummary);
    rows.push(row('dispatch', refused, roleLines(a, 'configure') - configureBefore, { minion: minionLabel(a), profile: 'configure' }));
    check(refused.json?.error?.code === 'target_blocked', `expected target_blocked, got ${refused.stdout.trim()}`);
    const r = await step(['reconcile', id, '--reason', 'operator checked the volume'], 0, (x) => {
      const rr = recordOf(x);
      return rr ? `record ${rr.state} by ${textOf(rr['reconciled_by'], '?')}: "${textOf(rr['reconciliation_reason'], '')}"` : recordSummary(x);
    });
    rows.push(row('reconcile', r, roleLines(a, 'volume_resize') - before));
    check(recordOf(r)?.state === 'reconciled', `expected reconciled, got ${recordSummary(r)}`);
    const d2 = await step(['dispatch', '--minion', a, '--profile', 'configure'], 0, dispatchedSummary);
    check(d2.json?.outcome === 'published' && recordOf(d2) !== null, `dispatch after reconcile did not publish: ${d2.stdout.trim()}`);
    const id2 = (recordOf(d2) as CliRecord).request_id;
    rows.push(row('dispatch', d2, roleLines(a, 'configure') - configureBefore));
    const p2 = await step(['poll', '--request-id', id2, '--watch', '--interval', '500'], 0, recordSummary);
    const polled2 = recordOf(p2);
    rows.push(row('poll', p2, roleLines(a, 'configure') - configureBefore));
    check(polled2?.state === 'succeeded' && polled2.passed === 5 && polled2.total === 5, `expected succeeded 5/5, got ${recordSummary(p2)}`);
    checkReceiptMatches(a, polled2 as CliRecord, readReceipt(a, id2));
    const resized = roleLines(a, 'volume_resize') - before;
    const configured = roleLines(a, 'configure') - configureBefore;
    check(resized === 1, `the killed volume_resize ran ${resized} times on A, expected exactly 1 (never re-applied)`);
    check(configured === 1, `the configure after reconcile ran ${configured} times on A, expected exactly 1`);
    outcome(started, rows, 'unknown blocked minion A until reconciled; the killed resize was never re-applied; the next configure succeeded');
  };

  const finale = async (a: string, b: string) => {
    const t = topo as Topology;
    say();
    say('== oduflow-master list (rows in dispatch order)');
    const l = await cli(['list']);
    check(l.exit === 0 && Array.isArray(l.json?.records), `oduflow-master list exited ${l.exit}${describeError(l)}`);
    const records = [...(l.json?.records ?? [])].sort((x, y) => String(x.jid).localeCompare(String(y.jid)));
    say(
      asciiTable(
        ['request_id', 'minion', 'profile', 'jid', 'state', 'passed', 'total', 'reason'],
        records.map((x) => [x.request_id, minionLabel(x.minion_id), x.profile, x.jid, x.state, x.passed, x.total, x.reason]),
        '  ',
      ),
    );
    const states = records.map((x) => x.state).sort();
    check(
      JSON.stringify(states) === JSON.stringify(['reconciled', 'succeeded', 'succeeded', 'succeeded']),
      `expected 4 records (3 succeeded, 1 reconciled), got ${JSON.stringify(states)}`,
    );
    const u = await cli(['list', '--unresolved']);
    check(u.exit === 0 && (u.json?.records ?? [null]).length === 0, 'expected no unresolved record at the end');
    check(t.markerLines(a).length === 3, `minion A's marker has ${t.markerLines(a).length} lines, expected 3 (configure, volume_resize, configure)`);
    check(t.markerLines(b).length === 1, `minion B's marker has ${t.markerLines(b).length} lines, expected 1 (volume_resize)`);
  };

  const teardown = (): Promise<void> => {
    tornDown ??= (async () => {
      for (const child of children) child.kill('SIGKILL');
      const t = topo ?? (starting === null ? null : await starting.catch(() => null));
      if (t !== null) await t.stop();
    })();
    return tornDown;
  };

  const interrupt = async (): Promise<void> => {
    interrupted = true;
    await teardown();
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
  };

  const run = async (): Promise<boolean> => {
    const started = Date.now();
    let ok = false;
    let failure: unknown = null;
    try {
      if (masterCli === null || !existsSync(masterCli)) {
        throw new DemoFailure('apps/master/dist/cli.js not found: build first (npx nx run-many -t build)');
      }
      dir = mkdtempSync(join(tmpdir(), 'oduflow-demo-'));
      storeDir = join(dir, 'store');
      mkdirSync(storeDir, { mode: 0o700 });
      say(`oduflow demo: starting a real salt-master, salt-api and 2 minions on 127.0.0.1 (dir ${dir})`);
      starting = startTopology({ minions: 2, slowStateSeconds: slow, dir: join(dir, 'topo') });
      topo = await starting;
      live();
      const [a, b] = topo.minionIds as [string, string];
      label.set(a, 'A');
      label.set(b, 'B');
      say(`  up in ${seconds(Date.now() - started)}: oduflow_job installed the production way (cloud-init files, then client_receipts)`);
      say(`  minion A = ${a}`);
      say(`  minion B = ${b}`);
      say(`  every step runs the real CLI: node ${masterCli} <command> --json (store ${storeDir})`);
      say(`  evidence columns: passed = passed/total states; marker = lines the role wrote on the minion (1 = ran once)`);
      await storyConfigure(a);
      await storyLostPublication(b);
      await storyUnknown(a);
      await finale(a, b);
      ok = true;
    } catch (error) {
      failure = error;
    }
    const scenarioMs = Date.now() - started;
    if (interrupted) return false; // interrupt() tears down and removes the directory
    let teardownError: unknown = null;
    try {
      await teardown();
    } catch (error) {
      teardownError = error;
      ok = false;
    }
    say();
    if (ok) {
      if (dir !== null) rmSync(dir, { recursive: true, force: true });
      say(
        `demo passed: ${checks} checks held across 3 scenarios, ${cliCalls} oduflow-master calls; ` +
          `nothing was applied twice; ${seconds(scenarioMs)}, torn down, no process left`,
      );
      return true;
    }
    if (openRows !== null && openRows.length > 0) say(evidenceTable(openRows));
    const message = failure instanceof Error ? failure.message : textOf(failure, '');
    if (failure !== null) say(`demo FAILED: ${message}`);
    if (failure !== null && !(failure instanceof DemoFailure) && failure instanceof Error && failure.stack) say(failure.stack);
    if (teardownError !== null) say(`demo FAILED to tear down: ${teardownError instanceof Error ? teardownError.message : textOf(teardownError, '')}`);
    const last = lastCli;
    if (last !== null && failure !== null && last.stderr.trim() !== '') {
      say(`  log of the last call (${cmdLine(last.argv)}):`);
      say(`  ${last.stderr.trim().slice(-2000)}`);
    }
    if (dir !== null) {
      say(`  kept for inspection: ${dir} (record store in store/, Salt logs in topo/logs, topo/master/log, topo/m*/log)`);
    }
    return false;
  };

  return {
    run,
    interrupt,
    get dir() {
      return dir;
    },
  };
}
