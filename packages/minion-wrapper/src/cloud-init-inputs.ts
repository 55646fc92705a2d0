import { isIP } from 'node:net';
import { MinionWrapperError } from './errors.js';

/*
 * Every value the cloud-init fragment writes into YAML or a shell script is
 * validated here first; messages never echo the offending value.
 */

const SAFE_PATH = /^\/[A-Za-z0-9._/-]*$/;
/** One RFC 1123 label: letters, digits, '-', not starting or ending with '-', 1-63 characters. */
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const PORT = /^[1-9][0-9]{0,4}$/;

export function assertSafeAbsolutePath(value: string, what: string): string {
  const trimmed = typeof value === 'string' ? value.replace(/(?<=.)\/+$/, '') : '';
  const segments = trimmed.split('/').slice(1);
  if (
    !SAFE_PATH.test(trimmed) ||
    trimmed.length > 1024 ||
    trimmed === '/' ||
    segments.some((segment) => segment === '' || segment === '.' || segment === '..')
  ) {
    throw new MinionWrapperError(
      'invalid_path',
      `${what} must be a normalized absolute path of letters, digits, '.', '_', '-' and '/'`,
    );
  }
  return trimmed;
}

/** An RFC 1123 host name (optional trailing dot) whose last label is not all digits. */
function isHostName(value: string): boolean {
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  if (name.length < 1 || name.length > 253) return false;
  const labels = name.split('.');
  if (!labels.every((label) => LABEL.test(label))) return false;
  // an all-numeric name that is not an IP address (e.g. 10.0.0.999, 12345) is refused
  return !/^[0-9]+$/.test(labels[labels.length - 1] ?? '');
}

const isPort = (value: string): boolean => PORT.test(value) && Number(value) <= 65535;

/**
 * Salt's `master` forms: an IP address (net.isIP), an RFC 1123 host name, or
 * either with a port: `host:port`, `1.2.3.4:port`, `[v6]:port`.
 */
function isMasterHost(value: string): boolean {
  if (isIP(value) !== 0) return true;
  if (isHostName(value)) return true;
  const bracketed = /^\[([^\]]+)\]:([^:]*)$/.exec(value);
  if (bracketed) return isIP(bracketed[1] ?? '') === 6 && isPort(bracketed[2] ?? '');
  const colon = value.lastIndexOf(':');
  if (colon <= 0 || value.indexOf(':') !== colon) return false;
  const host = value.slice(0, colon);
  return (isIP(host) === 4 || isHostName(host)) && isPort(value.slice(colon + 1));
}

export function assertMasterHost(value: string): string {
  if (typeof value !== 'string' || !isMasterHost(value)) {
    throw new MinionWrapperError('invalid_master_host', 'master must be a host name or an IP address, optionally with a port');
  }
  return value;
}

/** Shortest interval the fragment accepts: each run fetches the module from the master's file server. */
export const MIN_CLIENT_RECEIPTS_INTERVAL_SECONDS = 60;
/** Longest interval the fragment accepts (one week): a changed module must not stay for longer. */
export const MAX_CLIENT_RECEIPTS_INTERVAL_SECONDS = 7 * 24 * 3600;

/**
 * The schedule of the periodic client_receipts apply: an integer interval
 * from 60 s to one week, and a splay from 1 s (Salt draws 1..splay) up to
 * the interval.
 */
export function assertSchedule(intervalSeconds: number, splaySeconds: number): void {
  const intervalOk =
    Number.isSafeInteger(intervalSeconds) &&
    intervalSeconds >= MIN_CLIENT_RECEIPTS_INTERVAL_SECONDS &&
    intervalSeconds <= MAX_CLIENT_RECEIPTS_INTERVAL_SECONDS;
  if (!intervalOk) {
    throw new MinionWrapperError(
      'invalid_schedule',
      `the client_receipts interval must be a whole number of seconds from ${MIN_CLIENT_RECEIPTS_INTERVAL_SECONDS} to ${MAX_CLIENT_RECEIPTS_INTERVAL_SECONDS}`,
    );
  }
  if (!Number.isSafeInteger(splaySeconds) || splaySeconds < 1 || splaySeconds > intervalSeconds) {
    throw new MinionWrapperError(
      'invalid_schedule',
      'the client_receipts splay must be a whole number of seconds from 1 to the interval',
    );
  }
}
