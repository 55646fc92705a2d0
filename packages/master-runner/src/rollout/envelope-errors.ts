import { JobEnvelopeError } from '@oduflow/job-envelope';
import { MasterRunnerError } from '../errors.js';

/*
 * The rollout API throws MasterRunnerError only, like the rest of this
 * package, so the CLI and the service map one closed set of codes. What the
 * job envelope refuses becomes `rollout_refused` with the envelope's code as
 * `detail`; a workspace that cannot be written is `rollout_io`; an envelope
 * code that means our own stages or summary are wrong is `internal`. The
 * envelope's messages name runs, stages and fields, never values.
 */
export function fromEnvelopeError(error: unknown): unknown {
  if (!JobEnvelopeError.isInstance(error)) return error;
  switch (error.code) {
    case 'io_error':
      return new MasterRunnerError('rollout_io', error.message, { detail: error.code, cause: error });
    case 'aborted':
      return new MasterRunnerError('rollout_interrupted', 'the rollout was stopped before its end; resume it', { detail: error.code, cause: error });
    case 'invalid_spec':
    case 'invalid_stage_state':
    case 'invalid_summary':
      return new MasterRunnerError('internal', `the rollout job is malformed (${error.code})`, { detail: error.code, cause: error });
    default:
      return new MasterRunnerError('rollout_refused', error.message, { detail: error.code, cause: error });
  }
}

/** Runs `action`, rethrowing a job-envelope failure as a MasterRunnerError. */
export function viaEnvelope<T>(action: () => T): T {
  try {
    return action();
  } catch (error) {
    throw fromEnvelopeError(error);
  }
}
