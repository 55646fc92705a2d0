import type { ProtocolRequestRecord, RefusalReason, TerminalStatus } from '@oduflow/protocol';

/*
 * The explicit state of the protocol model: the master's records (one per
 * request, all for one target), its workers' in-flight tasks, the Salt
 * channel's messages, the minion's durable evidence and its live run jobs,
 * and the bookkeeping the invariants need (how often a state really ran,
 * whether a publication may have left). Every time is one constant instant:
 * the transition functions take time only as data, so a constant keeps the
 * state space finite without changing any decision.
 */

export const AT = '2026-01-01T00:00:00.000Z';
export const MINION_ID = 'client-0190e6a5-1c2d-7e3f-8a4b-5c6d7e8f9a0b';
export const REQUEST_IDS = [
  '3f1c9a2e-5b7d-4c8e-9f0a-1b2c3d4e5f60',
  '7a2b3c4d-5e6f-4a8b-9c0d-1e2f3a4b5c6d',
  'b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e',
] as const;
export const JIDS = ['20260101000000000001', '20260101000000000002', '20260101000000000003'] as const;

/** Deliberately broken versions of a rule, each of which the checker must catch. */
export const BROKEN_VARIANTS = [
  /** The poller treats `not_started` as "never arrived" and publishes the request again. */
  'republish_on_not_started',
  /** The poller writes the event applied to the record it read before its call, over whatever is stored now. */
  'poller_overwrites_stored_record',
  /** Dispatch does not look for an unresolved request of the target. */
  'dispatch_ignores_blockers',
  /** Publication calls Salt before it records the intent. */
  'publish_before_intent',
  /** The minion runs a publication again when it finds a claim without a receipt and no live worker. */
  'minion_reruns_abandoned_claim',
  /**
   * `run` takes the execution lock before the request lock (module 1.1.0):
   * a duplicate of a publication finds the execution lock held by its twin
   * and refuses it `execution_busy`.
   */
  'minion_takes_execution_lock_first',
  /**
   * `status` answers `running` for a JID index alone under a busy request
   * lock (module 1.1.0), so a refusal between its two writes is answered
   * `running`, then `refused`.
   */
  'status_running_between_refusal_writes',
] as const;
export type BrokenVariant = (typeof BROKEN_VARIANTS)[number];

export interface ModelConfig {
  /** Master workers (publishers and pollers sharing one record store). */
  readonly workers: number;
  /** Requests dispatched to the one target, in order, at most this many (at most 3). */
  readonly requests: number;
  /** Duplications the channel may make (publications and run returns). */
  readonly duplications: number;
  /** Master worker crashes (P1-P4: the worker loses whatever it was doing). */
  readonly masterCrashes: number;
  /** Minion run jobs killed (M1-M6, R1-R2). */
  readonly minionCrashes: number;
  /** Runs the minion refuses (not ready at run time, or a parallel state in the role). */
  readonly refusals: number;
  /** Operator reconciliations. */
  readonly reconciles: number;
  /** Publish calls that provably sent nothing. */
  readonly notSent: number;
  /** Dispatch may find the minion not ready (the request is recorded rejected, never published). */
  readonly capabilityRejections: boolean;
  /** How a state run may end. */
  readonly stateResults: readonly TerminalStatus[];
  /** A broken rule to check the checker with; none for the real protocol. */
  readonly variant?: BrokenVariant;
}

/** A record the module writes under `requests/`: a running claim, a receipt, or a refusal (DESIGN §4). */
export type MinionRecord = Readonly<Record<string, unknown>> & { readonly status: string };

interface Evidence {
  /** `jids/<jid>.json` committed. */
  readonly index: boolean;
  /** `requests/<request_id>.json`, as committed last. */
  readonly record: MinionRecord | null;
}

/**
 * Where a run job of the minion is (each boundary a crash point, DESIGN §6):
 * arrived (delivered, nothing checked), request_locked (holds the request
 * lock, decides), M1-M6 (the claim-run-commit path, both locks held), R1,
 * R1_index, R2 (the refusal path, request lock held). exec_locked (holds the
 * execution lock, waits for the request lock) exists only in the broken
 * variant that takes the execution lock first.
 */
type JobPhase = 'arrived' | 'request_locked' | 'exec_locked' | 'M1' | 'M2' | 'M3' | 'M4' | 'M5' | 'M6' | 'R1' | 'R1_index' | 'R2';

export interface Job {
  readonly r: number;
  readonly phase: JobPhase;
  /** Holds the execution lock. */
  readonly exec: boolean;
  /** The state run's result once it returned (M5, M6). */
  readonly result: TerminalStatus | null;
  /** Why it refuses (refusal path). */
  readonly reason: RefusalReason | null;
}

export type WorkerTask =
  | { readonly kind: 'idle' }
  /** publishPrepared: record the intent, call Salt, record the outcome. */
  | { readonly kind: 'publish'; readonly r: number; readonly phase: 'intent' | 'call' }
  /** The call's outcome, to be recorded (`lateIntent`: the broken variant that records the intent only now). */
  | { readonly kind: 'publish_outcome'; readonly r: number; readonly outcome: 'acked' | 'uncertain' | 'not_sent'; readonly lateIntent: boolean }
  /** A status call in flight; `snapshot` is the record as read before the call. */
  | { readonly kind: 'poll'; readonly r: number; readonly snapshot: ProtocolRequestRecord };

export type Message =
  /** `oduflow_job.run` on its way to the minion. */
  | { readonly kind: 'publication'; readonly r: number }
  /** `oduflow_job.status` on its way to the minion, for worker `w`. */
  | { readonly kind: 'ask'; readonly w: number; readonly r: number }
  /** The minion's status answer on its way back to worker `w`. */
  | { readonly kind: 'answer'; readonly w: number; readonly r: number; readonly ret: MinionRecord }
  /** A `run` return on the event bus, for the master's event recorder. */
  | { readonly kind: 'run_return'; readonly r: number; readonly retcode: number; readonly ret: MinionRecord };

interface Budget {
  readonly duplications: number;
  readonly masterCrashes: number;
  readonly minionCrashes: number;
  readonly refusals: number;
  readonly reconciles: number;
  readonly notSent: number;
}

export interface ModelState {
  readonly records: ReadonlyArray<ProtocolRequestRecord | null>;
  readonly workers: readonly WorkerTask[];
  /** A multiset, kept sorted so that equal states have equal keys. */
  readonly messages: readonly Message[];
  readonly evidence: readonly Evidence[];
  /** A multiset, kept sorted. */
  readonly jobs: readonly Job[];
  /** How many times each request's state really started (the side-effect marker). */
  readonly executions: readonly number[];
  /** A publish call for the request may have sent bytes (acked or uncertain). */
  readonly mayHaveSent: readonly boolean[];
  /** Salt was called to publish the request again after a call that may have sent bytes. */
  readonly republished: readonly boolean[];
  readonly budget: Budget;
}

export function initialState(config: ModelConfig): ModelState {
  if (config.requests < 1 || config.requests > REQUEST_IDS.length) throw new RangeError(`the model holds 1 to ${REQUEST_IDS.length} requests`);
  if (config.workers < 1) throw new RangeError('the model needs a master worker');
  const n = config.requests;
  return {
    records: Array.from({ length: n }, () => null),
    workers: Array.from({ length: config.workers }, () => ({ kind: 'idle' }) as const),
    messages: [],
    evidence: Array.from({ length: n }, () => ({ index: false, record: null })),
    jobs: [],
    executions: Array.from({ length: n }, () => 0),
    mayHaveSent: Array.from({ length: n }, () => false),
    republished: Array.from({ length: n }, () => false),
    budget: {
      duplications: config.duplications,
      masterCrashes: config.masterCrashes,
      minionCrashes: config.minionCrashes,
      refusals: config.refusals,
      reconciles: config.reconciles,
      notSent: config.notSent,
    },
  };
}

/** A record without the fields every record of a request shares: what differs between states. */
function recordKey(record: ProtocolRequestRecord | null): unknown {
  if (record === null) return null;
  return [record.state, record.publish_attempts, record.last_observation, record.passed, record.total, record.reason, record.reconciliation];
}

/** A minion answer or record is always the model's own wireAnswer for its request: its status, counts and reason say all. */
function answerKey(answer: MinionRecord | null): unknown {
  return answer === null ? null : [answer.status, answer['passed'], answer['total'], answer['reason'] ?? null];
}

/*
 * States share their parts (a step copies the arrays it changes and keeps
 * every other record, message, job and evidence object), so each part's key
 * text is computed once per object and cached.
 */
const partKeys = new WeakMap<object, string>();

function cached(part: object, render: () => unknown): string {
  let key = partKeys.get(part);
  if (key === undefined) {
    key = JSON.stringify(render());
    partKeys.set(part, key);
  }
  return key;
}

/** The key text of a record (cached): equal texts, equal records of the same request. */
export function recordText(record: ProtocolRequestRecord | null): string {
  return record === null ? 'null' : cached(record, () => recordKey(record));
}

function taskText(task: WorkerTask): string {
  return cached(task, () => (task.kind === 'poll' ? [task.kind, task.r, recordKey(task.snapshot)] : task));
}

/** A message's key with the workers in `order` (order[i] = the old index of new worker i). */
function messageText(message: Message, order: readonly number[]): string {
  if (message.kind === 'ask') return `a${message.r}.${order.indexOf(message.w)}`;
  if (message.kind === 'answer') return `s${message.r}.${order.indexOf(message.w)}${cached(message.ret, () => answerKey(message.ret))}`;
  if (message.kind === 'run_return') return `r${message.r}${cached(message.ret, () => answerKey(message.ret))}`;
  return `p${message.r}`;
}

function keyUnder(state: ModelState, order: readonly number[]): string {
  const messages = state.messages.map((m) => messageText(m, order)).sort();
  return [
    state.records.map(recordText).join(','),
    order.map((w) => taskText(state.workers[w] as WorkerTask)).join(','),
    messages.join(','),
    state.evidence.map((e) => cached(e, () => [e.index, answerKey(e.record)])).join(','),
    state.jobs.map((j) => cached(j, () => j)).join(','),
    JSON.stringify([state.executions, state.mayHaveSent, state.republished, state.budget]),
  ].join('|');
}

/**
 * The identity of a state for deduplication. Master workers are
 * interchangeable, so a state and its copy with two workers swapped are one
 * state: the key is the smallest over the orders of the workers.
 */
export function stateKey(state: ModelState): string {
  const n = state.workers.length;
  if (n === 1) return keyUnder(state, [0]);
  if (n === 2) {
    // Order the workers by their tasks; only when both do the same thing do their messages decide.
    const first = taskText(state.workers[0] as WorkerTask);
    const second = taskText(state.workers[1] as WorkerTask);
    if (first !== second) return keyUnder(state, first < second ? [0, 1] : [1, 0]);
    const a = keyUnder(state, [0, 1]);
    const b = keyUnder(state, [1, 0]);
    return a < b ? a : b;
  }
  return keyUnder(state, state.workers.map((_, w) => w));
}

/** Inserts into a sorted multiset (sorted by JSON text, so equal multisets are equal arrays). */
export function withItem<T>(items: readonly T[], item: T): T[] {
  const text = JSON.stringify(item);
  const next = [...items];
  let at = next.findIndex((other) => JSON.stringify(other) > text);
  if (at === -1) at = next.length;
  next.splice(at, 0, item);
  return next;
}

export function withoutIndex<T>(items: readonly T[], index: number): T[] {
  return [...items.slice(0, index), ...items.slice(index + 1)];
}

export function replaced<T>(items: readonly T[], index: number, item: T): T[] {
  const next = [...items];
  next[index] = item;
  return next;
}
