import type { EventRecorderMetrics, PollerMetrics, RecordStore } from '@oduflow/master-runner';
import { BLOCKING_STATES, type RequestState } from '@oduflow/protocol';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/*
 * Prometheus metrics, on a registry of the service's own (never prom-client's
 * global one, so two services in one test process do not mix). Every label
 * takes values from a closed set: outcomes, states, route templates — never
 * a request id, a minion id or anything a caller sent.
 */

export interface ServiceMetrics {
  readonly registry: Registry;
  admission(outcome: string): void;
  publication(outcome: string): void;
  httpRequest(route: string, method: string, status: number, seconds: number): void;
  readonly poller: PollerMetrics;
  readonly events: EventRecorderMetrics;
  /** Keys forgotten by the expiry loop. */
  keysExpired(count: number): void;
}

export interface MetricsOptions {
  /** Where the unresolved counts come from (countUnresolved, cached). */
  readonly store: RecordStore;
  /** How long a count of unresolved requests is reused (ms; default 15 000). */
  readonly unresolvedCacheMs?: number;
  readonly now?: () => number;
}

export function createServiceMetrics(options: MetricsOptions): ServiceMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const now = options.now ?? Date.now;
  const cacheMs = options.unresolvedCacheMs ?? 15_000;

  const admissions = new Counter({ name: 'oduflow_admissions_total', help: 'POST /v1/requests by outcome', labelNames: ['outcome'], registers });
  const publications = new Counter({ name: 'oduflow_publications_total', help: 'Outbox publications by outcome', labelNames: ['outcome'], registers });
  const polls = new Counter({ name: 'oduflow_polls_total', help: 'Status polls by outcome', labelNames: ['outcome'], registers });
  const sweepSeconds = new Histogram({
    name: 'oduflow_poll_sweep_duration_seconds',
    help: 'Duration of one walk of the poller over the whole backlog',
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300],
    registers,
  });
  const statusCalls = new Gauge({ name: 'oduflow_status_calls_in_flight', help: 'Status calls to salt-api in flight', registers });
  const http = new Histogram({
    name: 'oduflow_http_request_duration_seconds',
    help: 'HTTP requests by route template, method and status',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const eventToRecord = new Histogram({
    name: 'oduflow_event_to_record_seconds',
    help: 'From a run return arriving on the salt-api event stream to its record committed',
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5],
    registers,
  });
  const eventReturns = new Counter({
    name: 'oduflow_event_returns_total',
    help: 'Events from the salt-api stream: recorded (committed, unchanged) or ignored (why)',
    labelNames: ['outcome'],
    registers,
  });
  const streamConnected = new Gauge({ name: 'oduflow_event_stream_connected', help: '1 while the salt-api event stream is open', registers });
  const streamReconnects = new Counter({ name: 'oduflow_event_stream_reconnects_total', help: 'Event stream reconnections by reason', labelNames: ['reason'], registers });
  const keysExpired = new Counter({ name: 'oduflow_idempotency_keys_expired_total', help: 'Idempotency keys forgotten after their retention', registers });

  let cached: { at: number; counts: Promise<Partial<Record<RequestState, number>>> } | undefined;
  const counts = (): Promise<Partial<Record<RequestState, number>>> => {
    if (cached === undefined || now() - cached.at > cacheMs) {
      const pending = options.store.countUnresolved();
      cached = { at: now(), counts: pending };
      // A failed count is not cached: the next scrape asks again.
      pending.catch(() => {
        if (cached?.counts === pending) cached = undefined;
      });
    }
    return cached.counts;
  };
  new Gauge({
    name: 'oduflow_unresolved_requests',
    help: `Requests that block their target, by state (counted at most every ${cacheMs / 1000} s)`,
    labelNames: ['state'],
    registers,
    async collect() {
      const byState = await counts();
      for (const state of BLOCKING_STATES) this.set({ state }, byState[state] ?? 0);
    },
  });

  return {
    registry,
    admission: (outcome) => admissions.inc({ outcome }),
    publication: (outcome) => publications.inc({ outcome }),
    httpRequest: (route, method, status, seconds) => http.observe({ route, method, status: String(status) }, seconds),
    poller: {
      onPoll: (outcome) => polls.inc({ outcome }),
      onSweep: (_summary, durationMs) => sweepSeconds.observe(durationMs / 1000),
      onInFlight: (calls) => statusCalls.set(calls),
    },
    events: {
      onConnected: (connected) => streamConnected.set(connected ? 1 : 0),
      onReconnect: (reason) => streamReconnects.inc({ reason }),
      onRecorded: (outcome, durationMs) => {
        eventReturns.inc({ outcome });
        if (outcome === 'committed') eventToRecord.observe(durationMs / 1000);
      },
      onIgnored: (why) => eventReturns.inc({ outcome: `ignored_${why}` }),
    },
    keysExpired: (count) => keysExpired.inc(count),
  };
}
