import { pino, type Logger } from 'pino';

/*
 * Structured logs: one JSON object per line on stderr, with request_id,
 * minion_id, jid and state where they apply. Callers never pass state data,
 * tokens or passwords; `redact` is the second line of defence for the paths
 * where they could appear by mistake.
 */
export const REDACTED_PATHS = [
  'password',
  'token',
  'state_data_json',
  'stateDataJson',
  'legacy_fields',
  'headers["x-auth-token"]',
  // The HTTP service: bearer tokens, request bodies and the state data they may carry.
  'authorization',
  'headers.authorization',
  'state_data',
  'body',
  '*.password',
  '*.token',
  '*.state_data_json',
  '*.stateDataJson',
  '*.legacy_fields',
  '*.headers["x-auth-token"]',
  '*.authorization',
  '*.headers.authorization',
  '*.state_data',
  '*.body',
];

export type { Logger } from 'pino';

export interface LoggerOptions {
  readonly level?: string;
  /** File descriptor to write to; stderr by default so stdout stays for tables and JSON. */
  readonly fd?: number;
}

export function createMasterLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      name: 'oduflow-master',
      level: options.level ?? 'info',
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
    },
    pino.destination({ fd: options.fd ?? 2, sync: true }),
  );
}

/** A logger that writes nothing, for library callers that bring none. */
export function silentLogger(): Logger {
  return pino({ enabled: false });
}
