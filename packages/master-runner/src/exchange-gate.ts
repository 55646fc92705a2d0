/*
 * Which salt-api exchanges of one client may overlap.
 *
 * salt-api 3006.27 (rest_cherrypy) builds a NetapiClient for every lowstate
 * request (salt/netapi/rest_cherrypy/app.py:1200, `exec_lowstate`) and for
 * every login (app.py:1880, `Login.POST`). Its constructor calls
 * `salt.daemons.masterapi.access_keys` (salt/netapi/__init__.py:82), which
 * rewrites `<cachedir>/saltapi/.<user>_key` for every publisher user
 * (`.root_key` for root) with `mk_key` (salt/daemons/masterapi.py:212-252):
 * `os.path.exists` → `os.unlink` → `fopen(keyfile, "w+")` under umask 0o277
 * → `chmod 0600`, with no lock. Two requests in that window race: both see
 * the file and the second unlink raises FileNotFoundError, or one opens the
 * 0400 file the other just created (PermissionError unless root). The
 * exception escapes before `api.run(chunk)` runs and `hypermedia_handler`
 * turns it into HTTP 500 "An unexpected error occurred" (app.py:881-906),
 * indistinguishable from a 500 raised after the lowstate ran.
 *
 * So: reads (logins, status and capability calls: `local`) may overlap one
 * another — a 500 on a read is retried, the read changes nothing. A
 * publication never overlaps any other exchange of this client: it waits for
 * the reads in flight to end and holds back new ones until it is answered, so
 * its 500 (still recorded uncertain, never retried) is not this race. Waiters
 * are served in arrival order, so a stream of reads cannot starve a
 * publication, nor a burst of publications the reads. Other processes using
 * the same salt-api (another master instance, the salt CLI) can still race
 * with a publication; that 500 stays uncertain, as before.
 */

export type ExchangeKind = 'read' | 'publication';

export interface ExchangeGate {
  /** Runs `work` when its kind may run: reads together (up to the limit), a publication alone. */
  run<T>(kind: ExchangeKind, work: () => Promise<T>): Promise<T>;
  /** Reads in flight now (for metrics). */
  readonly readsInFlight: number;
}

interface Waiter {
  readonly kind: ExchangeKind;
  readonly go: () => void;
}

export function createExchangeGate(maxConcurrentReads: number): ExchangeGate {
  let reads = 0;
  let publishing = false;
  const waiting: Waiter[] = [];

  const admissible = (kind: ExchangeKind): boolean => (kind === 'publication' ? !publishing && reads === 0 : !publishing && reads < maxConcurrentReads);

  const pump = (): void => {
    // Strict arrival order: the head waits, and everyone behind it.
    for (let head = waiting[0]; head !== undefined && admissible(head.kind); head = waiting[0]) {
      waiting.shift();
      if (head.kind === 'publication') publishing = true;
      else reads += 1;
      head.go();
    }
  };

  const leave = (kind: ExchangeKind): void => {
    if (kind === 'publication') publishing = false;
    else reads -= 1;
    pump();
  };

  return {
    get readsInFlight() {
      return reads;
    },
    async run(kind, work) {
      await new Promise<void>((go) => {
        waiting.push({ kind, go });
        pump();
      });
      try {
        return await work();
      } finally {
        leave(kind);
      }
    },
  };
}
