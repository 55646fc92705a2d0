import { spawn } from 'node:child_process';
import { isDeepStrictEqual } from 'node:util';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Position, Recorded, Sequence } from './enumerate.js';
import { FsImage } from './fs-image.js';
import { EFFECT_DIR, MILESTONE_DIR, toOperations } from './operations.js';
import { traceCommand } from './strace.js';

/*
 * The minion module's durable writes (oduflow_job.py, imported by path and
 * run without Salt, as its by-path tests do): a claim and its terminal
 * receipt, and refusal records. Recovery is the module's own: `status` for
 * the publication, then a later plain `run` delivery of the same JID, then
 * `status` again (python/crash_states_helper.py).
 *
 * Allowed answers per point (DESIGN §6): a crash between two milestones may
 * give what either of them allows (and what `between` adds for a window with
 * no crash seam of its own). "receipt" and "refused" mean the exact answer
 * the uninterrupted run returned, byte for byte.
 */

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..', '..', '..', '..');
/** The module under test: the repository's, or ODUFLOW_CRASH_MODULE (a copy to enumerate while another tool rewrites the file). */
const MODULE_PATH = process.env['ODUFLOW_CRASH_MODULE'] ?? join(REPO, 'packages', 'minion-wrapper', 'salt', '_modules', 'oduflow_job.py');
const HELPER = join(REPO, 'packages', 'test-harness', 'python', 'crash_states_helper.py');

function python(): string {
  return join(resolve(process.env['ODUFLOW_VENV'] ?? join(REPO, '.venv')), 'bin', 'python');
}

const IDS = {
  minion_id: 'client-3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b',
  request_id: '7c6b5a49-3827-4165-9a4b-3c2d1e0f9a8b',
  jid: '20261129100000123456',
  profile: 'configure',
  earlier_request_id: '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
  earlier_jid: '20261129090000654321',
} as const;

type Answer = Record<string, unknown>;

export interface MinionOutcome {
  readonly status?: Answer;
  readonly redelivery?: Answer;
  readonly after?: Answer;
  readonly executions?: number;
  /** On a copy of the state: a delivery of the same JID that run refuses (forbidden option), then status. */
  readonly refusal?: Answer;
  readonly after_refusal?: Answer;
  readonly exception?: string;
}

interface MinionContext {
  /** What the uninterrupted run answered: the exact receipt or refusal. */
  readonly expected: Answer;
  readonly base: string;
  readonly cachedir: string;
}

export interface MinionSequenceSpec {
  readonly name: string;
  /** The helper's scenario: succeed, fail, render_error, parallel, forbidden. */
  readonly kind: 'succeed' | 'fail' | 'render_error' | 'parallel' | 'forbidden';
  /** A store that already served an earlier request (false: the minion's first apply creates the store). */
  readonly existingStore: boolean;
  /** Allowed status labels at each milestone (start, M1..M6 / R1, R2, effect, done). */
  readonly table: Readonly<Record<string, readonly string[]>>;
  /** Extra labels allowed strictly between two milestones (`after>before`). */
  readonly between?: Readonly<Record<string, readonly string[]>>;
}

const CLAIM_TABLE = {
  start: ['not_started'],
  M1: ['not_started'],
  M2: ['unknown'],
  M3: ['unknown'],
  effect: ['unknown'],
  M5: ['unknown'],
  M6: ['receipt'],
  done: ['receipt'],
  end: ['receipt'],
} as const;

const REFUSAL_TABLE = {
  start: ['not_started'],
  R1: ['not_started'],
  R2: ['refused'],
  done: ['refused'],
  end: ['refused'],
} as const;

export const MINION_SEQUENCES: readonly MinionSequenceSpec[] = [
  { name: 'minion: first apply on a new store (claim, receipt succeeded)', kind: 'succeed', existingStore: false, table: CLAIM_TABLE },
  { name: 'minion: apply on a used store (claim, receipt failed)', kind: 'fail', existingStore: true, table: CLAIM_TABLE },
  // No chunk: the claim is written after the state function returned, then the receipt (unknown).
  { name: 'minion: render error (late claim, receipt unknown)', kind: 'render_error', existingStore: true, table: { ...CLAIM_TABLE, M6: ['unknown'], done: ['unknown'], end: ['unknown'] } },
  // "A death between a refusal's two writes leaves an index alone, which status answers unknown."
  { name: 'minion: refusal record (forbidden option)', kind: 'forbidden', existingStore: true, table: REFUSAL_TABLE, between: { 'R1>R2': ['unknown'] } },
  { name: 'minion: refusal record at the gate (parallel state), new store', kind: 'parallel', existingStore: false, table: REFUSAL_TABLE, between: { 'R1>R2': ['unknown'] } },
];

function runHelper(mode: 'setup' | 'recover', config: object, input?: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(python(), [HELPER, mode, JSON.stringify(config)], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolvePromise(stdout) : reject(new Error(`crash_states_helper ${mode} exited ${code}: ${stderr.slice(-2000)}`))));
    child.stdin.end(input ?? '');
  });
}

/** The label of a status answer: its status, an error code, or whether a verdict is the exact one. */
function labelOf(answer: Answer | undefined, expected: Answer): string {
  if (answer === undefined) return 'none';
  if (typeof answer['error'] === 'string') return `error:${answer['error']}`;
  const status = answer['status'];
  if (status === 'succeeded' || status === 'failed') return isDeepStrictEqual(answer, expected) ? 'receipt' : 'wrong-receipt';
  if (status === 'refused') return isDeepStrictEqual(answer, expected) ? 'refused' : 'wrong-refusal';
  if (status === 'unknown' && expected['status'] === 'unknown' && !isDeepStrictEqual(answer, expected)) return 'wrong-receipt';
  return String(status);
}

function allowedAt(spec: MinionSequenceSpec, position: Position): Set<string> {
  return new Set([...(spec.table[position.after] ?? []), ...(spec.table[position.before] ?? []), ...(spec.between?.[`${position.after}>${position.before}`] ?? [])]);
}

function judgeMinion(spec: MinionSequenceSpec, outcome: MinionOutcome, position: Position, expected: Answer): string[] {
  if (outcome.exception !== undefined) return [`recovery raised: ${outcome.exception.split('\n').slice(-2).join(' ')}`];
  const problems: string[] = [];
  const label = labelOf(outcome.status, expected);
  const allowed = allowedAt(spec, position);
  if (!allowed.has(label)) problems.push(`status answered ${label}; allowed here: ${[...allowed].join(', ')}`);
  if (label === 'running') problems.push('status answered running for a worker that died');
  if (label.startsWith('wrong-')) problems.push('status answered a verdict that is not the exact receipt/refusal');
  const executions = position.executions + (outcome.executions ?? 0);
  if (executions > 1) problems.push(`the state ran ${executions} times for one publication`);
  if (label === 'not_started' && position.executions > 0) problems.push('status answered not_started after the state ran');
  const committed = spec.table[position.after]?.every((l) => l === 'receipt' || l === 'refused') === true;
  if (committed && !isDeepStrictEqual(outcome.status, expected)) problems.push('a committed terminal answer was lost or changed');
  const redelivery = outcome.redelivery;
  const after = outcome.after;
  if (label === 'not_started') {
    if (!isDeepStrictEqual(after, redelivery)) problems.push('after a re-delivery that ran, status does not answer its receipt');
  } else {
    if ((outcome.executions ?? 0) > 0) problems.push(`a re-delivery ran the state after status answered ${label}`);
    if (label === 'receipt' || label === 'refused') {
      if (!isDeepStrictEqual(redelivery, outcome.status)) problems.push(`a re-delivery answered ${labelOf(redelivery, expected)}, not the recorded answer`);
      if (!isDeepStrictEqual(after, outcome.status)) problems.push('status changed after a re-delivery');
    } else if (label === 'unknown') {
      // An abandoned claim (already_claimed) and an unknown receipt (itself) answer status alike.
      const receiptAgain = expected['status'] === 'unknown' && isDeepStrictEqual(redelivery, expected);
      if (redelivery?.['error'] !== 'already_claimed' && !receiptAgain) {
        problems.push(`a re-delivery of an abandoned claim answered ${labelOf(redelivery, expected)}, not already_claimed`);
      }
      if (labelOf(after, expected) !== 'unknown') problems.push('status changed after a re-delivery of an abandoned claim');
    }
  }
  problems.push(...judgeRefusingDelivery(label, outcome, expected));
  return problems;
}

/** A refusal is never written over a claim or a receipt, and never changes what status answers. */
function judgeRefusingDelivery(label: string, outcome: MinionOutcome, expected: Answer): string[] {
  const { refusal, after_refusal: after } = outcome;
  const problems: string[] = [];
  if (label === 'not_started') {
    const refused = refusal?.['status'] === 'refused' && refusal['reason'] === 'forbidden_option' && refusal['jid'] === expected['jid'];
    if (!refused) problems.push(`a refusing delivery on nothing answered ${labelOf(refusal, expected)}, not refused`);
    if (!isDeepStrictEqual(after, refusal)) problems.push('after a refusal was committed, status does not answer it');
  } else if (label === 'unknown') {
    const receiptAgain = expected['status'] === 'unknown' && isDeepStrictEqual(refusal, expected);
    if (refusal?.['error'] !== 'already_claimed' && !receiptAgain) problems.push(`a refusing delivery over an abandoned claim answered ${labelOf(refusal, expected)}`);
    if (labelOf(after, expected) !== 'unknown') problems.push(`a refusing delivery turned an abandoned claim into ${labelOf(after, expected)}`);
  } else if (label === 'receipt' || label === 'refused') {
    if (!isDeepStrictEqual(refusal, outcome.status)) problems.push(`a refusing delivery over a final answer answered ${labelOf(refusal, expected)}`);
    if (!isDeepStrictEqual(after, outcome.status)) problems.push('a refusing delivery changed a final answer');
  } else if (labelOf(after, expected) !== label) {
    problems.push(`a refusing delivery changed the error ${label} into ${labelOf(after, expected)}`);
  }
  return problems;
}

export function minionSequence(spec: MinionSequenceSpec): Sequence<MinionContext, MinionOutcome> {
  return {
    name: spec.name,
    async record(workdir: string): Promise<Recorded<MinionContext>> {
      const base = join(workdir, 'base');
      const cachedir = join(workdir, 'cache');
      mkdirSync(join(base, EFFECT_DIR), { recursive: true, mode: 0o700 });
      mkdirSync(cachedir, { mode: 0o700 });
      const config = { ...IDS, base, cachedir, module: MODULE_PATH, scenario: { kind: spec.kind } };
      if (spec.existingStore) await runHelper('setup', config);
      const initial = FsImage.snapshot(base, new Set([EFFECT_DIR, MILESTONE_DIR]));
      const traced = await traceCommand([python(), HELPER, 'record', JSON.stringify(config)]);
      const result = JSON.parse(traced.stdout) as { answer: Answer; umask: number; uid: number; gid: number };
      const recording = toOperations(traced.calls, { base, initial, umask: result.umask, uid: result.uid, gid: result.gid });
      return { recording, context: { expected: result.answer, base, cachedir } };
    },
    async recover(dirs: readonly string[], context: MinionContext): Promise<MinionOutcome[]> {
      const lines = dirs.map((dir, i) =>
        JSON.stringify({ ...IDS, store: join(dir, 'store'), marker: join(dirname(dir), `marker-${i}`), redeliver: { kind: 'succeed' } }),
      );
      const out = await runHelper('recover', { module: MODULE_PATH, cachedir: context.cachedir }, `${lines.join('\n')}\n`);
      const outcomes = out.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as MinionOutcome);
      if (outcomes.length !== dirs.length) throw new Error(`the recovery helper answered ${outcomes.length} of ${dirs.length} states`);
      return outcomes;
    },
    judge: (outcome, position, context) => judgeMinion(spec, outcome, position, context.expected),
    label: (outcome, context) => (outcome.exception !== undefined ? 'exception' : labelOf(outcome.status, context.expected)),
  };
}
