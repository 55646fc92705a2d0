import { readFileSync } from 'node:fs';

/**
 * This process's umask, read from /proc (Linux) instead of process.umask(),
 * whose no-argument form is deprecated because it writes the umask twice.
 */
export function currentUmask(): number {
  const match = /^Umask:\s+([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  if (match?.[1] === undefined) throw new Error('crash states: /proc/self/status has no Umask line');
  return Number.parseInt(match[1], 8);
}
