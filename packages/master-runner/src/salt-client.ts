import type { TransportFailure } from '@oduflow/protocol';

/*
 * What the runner needs from Salt, independent of transport. Failures are
 * data, classified by what they prove about the request:
 *   - `not_sent`: provably nothing of the request left this process (the
 *     login before it failed, or the connection to salt-api was never
 *     established), so repeating it cannot duplicate a publication;
 *   - `uncertain`: anything else, including any HTTP answer (401 too) to a
 *     publication that was sent; the request may have been acted on.
 */

/** Why a Salt call failed, in stable machine-readable terms (the protocol's closed TRANSPORT_FAILURES). */
export type SaltFailureReason = TransportFailure;

export type PublishOutcome =
  /** salt-api published to exactly our minion under our JID. */
  | { readonly kind: 'acked' }
  | { readonly kind: 'not_sent'; readonly reason: SaltFailureReason }
  | { readonly kind: 'uncertain'; readonly reason: SaltFailureReason };

export type CallOutcome =
  /** The minion answered; `ret` is its raw return, not yet validated. */
  | { readonly kind: 'returned'; readonly retcode: number; readonly ret: unknown }
  /** The minion is targeted but did not answer within the timeout. */
  | { readonly kind: 'no_return' }
  /** No accepted minion key matched: the target does not exist for Salt. */
  | { readonly kind: 'no_target' }
  | { readonly kind: 'failed'; readonly reason: SaltFailureReason; readonly sent: boolean };

export interface CallOptions {
  /** Ends the call early (a poller shutting down); the outcome is then a failure nobody should record. */
  readonly signal?: AbortSignal;
}

export interface SaltClient {
  /** Publishes `fun(args)` to exactly `minionId` under `jid`, asynchronously (local_async). Never throws for transport failures. */
  publish(minionId: string, jid: string, fun: string, args: readonly string[]): Promise<PublishOutcome>;
  /**
   * Calls `fun(args)` on exactly `minionId` and waits for its return (local),
   * at most `timeoutMs`. Read-only calls only: an implementation may send it
   * more than once, and run several at once.
   */
  call(minionId: string, fun: string, args: readonly string[], timeoutMs: number, options?: CallOptions): Promise<CallOutcome>;
  /**
   * Optional: several read-only calls, each to exactly one minion with its own
   * arguments (one Salt publication each: no minion sees another's), sent in
   * one salt-api exchange, which runs them one after another. `timeoutMs` is
   * per call. The outcomes in the order of `calls`.
   */
  callMany?(calls: readonly SaltCall[], timeoutMs: number, options?: CallOptions): Promise<CallOutcome[]>;
}

/** One call of a callMany. */
export interface SaltCall {
  readonly minionId: string;
  readonly fun: string;
  readonly args: readonly string[];
}

/** Whom a fleet call targets: a glob over accepted minion keys, or exactly these minion ids. */
export type FleetTarget = { readonly glob: string } | { readonly list: readonly string[] };

/** One minion's part of a fleet call, keyed by the minion id Salt reported. */
export type FleetAnswer =
  | { readonly kind: 'returned'; readonly retcode: number; readonly ret: unknown }
  /** An accepted minion the publication expected that did not return in time. */
  | { readonly kind: 'no_return' }
  /** salt-api's entry for that minion is not `false` nor `{ret, retcode}`. */
  | { readonly kind: 'malformed' };

export type FleetCallOutcome =
  /** Every targeted accepted minion, answered or not; an empty map when no accepted key matched. */
  | { readonly kind: 'returned'; readonly answers: ReadonlyMap<string, FleetAnswer> }
  | { readonly kind: 'failed'; readonly reason: SaltFailureReason; readonly sent: boolean };

/** Read-only calls to many minions at once (verify-fleet). */
export interface SaltFleetClient {
  callFleet(target: FleetTarget, fun: string, args: readonly string[], timeoutMs: number): Promise<FleetCallOutcome>;
}

/** How one connection to the event stream ended. */
export type EventStreamEnd =
  /** The caller's signal aborted it. */
  | { readonly kind: 'aborted' }
  /** salt-api closed a stream it had opened (a restart, an expired token). */
  | { readonly kind: 'ended' }
  /** It could not be opened, or broke; `unauthorized` when salt-api refused the token. */
  | { readonly kind: 'failed'; readonly reason: SaltFailureReason };

export interface FollowEventsOptions {
  readonly signal: AbortSignal;
  /** Deadline of the login and of the stream's opening (not of the stream). */
  readonly connectTimeoutMs?: number;
  /** Called once the stream is open. */
  readonly onOpen?: () => void;
}

/** The master's event bus as salt-api streams it (`GET /events`). */
export interface SaltEventSource {
  /**
   * Follows one connection to the stream, calling `onEvent` with every
   * event's parsed `data` ({tag, data}), until it ends; never throws for
   * transport failures. Reconnecting is the caller's policy.
   */
  followEvents(onEvent: (event: unknown) => void, options: FollowEventsOptions): Promise<EventStreamEnd>;
}
