/*
 * What the runner needs from Salt, independent of transport. Failures are
 * data, classified by what they prove about the request:
 *   - `not_sent`: provably nothing of the request left this process (the
 *     login before it failed, or the connection to salt-api was never
 *     established), so repeating it cannot duplicate a publication;
 *   - `uncertain`: anything else, including any HTTP answer (401 too) to a
 *     publication that was sent; the request may have been acted on.
 */

/** Why a Salt call failed, in stable machine-readable terms (recorded as a record's reason). */
export type SaltFailureReason =
  | 'connection_refused'
  | 'host_not_found'
  | 'connect_timeout'
  | 'network_error'
  | 'timeout'
  | 'connection_reset'
  | 'http_error'
  | 'server_error'
  | 'malformed_response'
  | 'response_too_large'
  /** salt-api refused the login. */
  | 'auth_failed'
  /** salt-api answered 401 to a request that had been sent (the session was rejected). */
  | 'unauthorized'
  | 'no_matching_minion'
  | 'jid_mismatch';

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

export interface SaltClient {
  /** Publishes `fun(args)` to exactly `minionId` under `jid`, asynchronously (local_async). Never throws for transport failures. */
  publish(minionId: string, jid: string, fun: string, args: readonly string[]): Promise<PublishOutcome>;
  /** Calls `fun(args)` on exactly `minionId` and waits for its return (local), at most `timeoutMs`. */
  call(minionId: string, fun: string, args: readonly string[], timeoutMs: number): Promise<CallOutcome>;
}
