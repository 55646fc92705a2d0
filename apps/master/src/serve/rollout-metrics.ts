import { Counter, Gauge, type Registry } from 'prom-client';

/*
 * Rollout metrics, on the service's own registry. Labels take closed sets
 * only: how a rollout run started, how it ended, what POST /v1/rollouts
 * answered — never a rollout id, a tenant or a target.
 */

/** How a rollout run ended in this process: its report's status, stopped by a shutdown, or stopped by an error (a checkpoint that could not be written). */
const ROLLOUT_ENDINGS = ['succeeded', 'failed', 'interrupted', 'error'] as const;
type RolloutEnding = (typeof ROLLOUT_ENDINGS)[number];

export interface RolloutMetrics {
  /** POST /v1/rollouts that reached the rollout service, by outcome: started, replayed, key_mismatch, key_in_flight, or the refusal's code. */
  admission(outcome: string): void;
  /** A rollout run began in this process: asked for over HTTP, or resumed after a restart. */
  started(origin: 'request' | 'resume'): void;
  finished(ending: RolloutEnding): void;
}

export function createRolloutMetrics(registry: Registry, running: () => number): RolloutMetrics {
  const registers = [registry];
  const admissions = new Counter({ name: 'oduflow_rollout_admissions_total', help: 'POST /v1/rollouts by outcome', labelNames: ['outcome'], registers });
  const started = new Counter({ name: 'oduflow_rollouts_started_total', help: 'Rollout runs started in this process: asked for (request) or resumed after a restart (resume)', labelNames: ['origin'], registers });
  const finished = new Counter({
    name: 'oduflow_rollouts_finished_total',
    help: 'Rollout runs ended in this process: succeeded, failed (halted), interrupted (by a shutdown; resumed at the next start) or error',
    labelNames: ['status'],
    registers,
  });
  for (const status of ROLLOUT_ENDINGS) finished.inc({ status }, 0);
  for (const origin of ['request', 'resume']) started.inc({ origin }, 0);
  new Gauge({
    name: 'oduflow_rollouts_running',
    help: 'Rollout runs in progress in this process',
    registers,
    collect() {
      this.set(running());
    },
  });
  return {
    admission: (outcome) => admissions.inc({ outcome }),
    started: (origin) => started.inc({ origin }),
    finished: (status) => finished.inc({ status }),
  };
}
