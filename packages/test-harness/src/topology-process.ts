import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** One Linux process as /proc shows it. */
export interface ProcInfo {
  pid: number;
  ppid: number;
  pgid: number;
  sid: number;
  state: string;
  /** argv joined with spaces (setproctitle may have rewritten it). */
  cmdline: string;
  cwd: string | null;
}

/** The state of a thread of `pid` that has not exited yet, or null when none is left. */
function liveThreadState(pid: number): string | null {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  for (const tid of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      if (state !== undefined && state !== 'Z' && state !== 'X') return state;
    } catch {
      // this thread is gone
    }
  }
  return null;
}

function readProc(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid pgrp session ..." — comm may contain spaces and parens.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // /proc/<pid>/stat shows the thread-group leader. A SIGKILLed
    // multi-threaded process (salt-api's CherryPy child) can show a zombie
    // leader while its other threads are still exiting and the shared file
    // table, listening socket included, is still open: the kernel then still
    // completes TCP handshakes on its port. It is gone only when every thread is.
    if (fields[0] === 'Z' || fields[0] === 'X') {
      const live = liveThreadState(pid);
      if (live !== null) fields[0] = live;
    }
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
    let cwd: string | null = null;
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      cwd = null;
    }
    return {
      pid,
      state: fields[0] ?? '?',
      ppid: Number(fields[1]),
      pgid: Number(fields[2]),
      sid: Number(fields[3]),
      cmdline,
      cwd,
    };
  } catch {
    return null; // exited while we looked
  }
}

/** Every live (non-zombie) process on the machine. */
function listProcesses(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const info = readProc(Number(entry));
    if (info && info.state !== 'Z' && info.state !== 'X') out.push(info);
  }
  return out;
}

/** Live processes whose process group is `pgid`. */
export function processGroupMembers(pgid: number): ProcInfo[] {
  return listProcesses().filter((p) => p.pgid === pgid);
}

/**
 * Processes that belong to a topology rooted at `dir`: their command line
 * names a path inside it (every Salt daemon runs with `-c <dir>/...`, and
 * forked workers keep that argv) or their working directory is inside it
 * (the test roles run their commands there). Never the calling process.
 */
export function processesUnder(dir: string): ProcInfo[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return listProcesses().filter(
    (p) =>
      p.pid !== process.pid &&
      (p.cmdline.includes(prefix) || (p.cwd !== null && (p.cwd === dir || p.cwd.startsWith(prefix)))),
  );
}

export function isAlive(pid: number): boolean {
  const info = readProc(pid);
  return info !== null && info.state !== 'Z' && info.state !== 'X';
}

/** Sends a signal, ignoring "no such process". */
export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

export const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls `probe` until it returns a value other than undefined, or throws at
 * the deadline naming `what` (a function lets the label show state read at
 * the deadline). Tests wait on conditions with this, never on fixed sleeps.
 */
export async function waitFor<T>(
  what: string | (() => string),
  timeoutMs: number,
  probe: () => Promise<T | undefined> | T | undefined,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const reason = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      const label = typeof what === 'string' ? what : what();
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${label}${reason}`);
    }
    await delay(intervalMs);
  }
}

/**
 * A minimal MessagePack decoder, enough for the job files Salt writes under
 * `<cachedir>/proc/<jid>` (maps, arrays, strings, numbers, nil, booleans,
 * binary). Returns undefined for anything it does not understand.
 */
function decodeMsgpack(buf: Buffer): unknown {
  let offset = 0;
  const need = (n: number) => {
    if (offset + n > buf.length) throw new Error('truncated');
  };
  const str = (n: number) => {
    need(n);
    const value = buf.toString('utf8', offset, offset + n);
    offset += n;
    return value;
  };
  const bin = (n: number) => {
    need(n);
    const value = buf.subarray(offset, offset + n);
    offset += n;
    return value;
  };
  const read = (): unknown => {
    need(1);
    const byte = buf[offset++] as number;
    if (byte <= 0x7f) return byte;
    if (byte >= 0xe0) return byte - 0x100;
    if ((byte & 0xf0) === 0x80) return map(byte & 0x0f);
    if ((byte & 0xf0) === 0x90) return array(byte & 0x0f);
    if ((byte & 0xe0) === 0xa0) return str(byte & 0x1f);
    const u = (n: 1 | 2 | 4) => {
      need(n);
      const value = n === 1 ? buf.readUInt8(offset) : n === 2 ? buf.readUInt16BE(offset) : buf.readUInt32BE(offset);
      offset += n;
      return value;
    };
    switch (byte) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: return bin(u(1));
      case 0xc5: return bin(u(2));
      case 0xc6: return bin(u(4));
      case 0xca: need(4); offset += 4; return buf.readFloatBE(offset - 4);
      case 0xcb: need(8); offset += 8; return buf.readDoubleBE(offset - 8);
      case 0xcc: return u(1);
      case 0xcd: return u(2);
      case 0xce: return u(4);
      case 0xcf: need(8); offset += 8; return Number(buf.readBigUInt64BE(offset - 8));
      case 0xd0: need(1); offset += 1; return buf.readInt8(offset - 1);
      case 0xd1: need(2); offset += 2; return buf.readInt16BE(offset - 2);
      case 0xd2: need(4); offset += 4; return buf.readInt32BE(offset - 4);
      case 0xd3: need(8); offset += 8; return Number(buf.readBigInt64BE(offset - 8));
      case 0xd9: return str(u(1));
      case 0xda: return str(u(2));
      case 0xdb: return str(u(4));
      case 0xdc: return array(u(2));
      case 0xdd: return array(u(4));
      case 0xde: return map(u(2));
      case 0xdf: return map(u(4));
      default: throw new Error(`unsupported msgpack type 0x${byte.toString(16)}`);
    }
  };
  const array = (n: number) => Array.from({ length: n }, () => read());
  const map = (n: number) => {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < n; i += 1) {
      const key = read();
      out[String(key)] = read();
    }
    return out;
  };
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** One running Salt job on a minion, from `<cachedir>/proc/<jid>`. */
export interface JobWorker {
  jid: string;
  pid: number;
  fun: string;
}

/** Running job workers of a minion: proc files whose pid is alive and runs that minion's salt-minion. */
export function readJobWorkers(cacheDir: string, minionConfigDir: string): JobWorker[] {
  const procDir = `${cacheDir}/proc`;
  let entries: string[];
  try {
    entries = readdirSync(procDir);
  } catch {
    return [];
  }
  const out: JobWorker[] = [];
  for (const jid of entries) {
    let data: unknown;
    try {
      data = decodeMsgpack(readFileSync(`${procDir}/${jid}`));
    } catch {
      continue;
    }
    if (data === null || typeof data !== 'object') continue;
    const record = data as Record<string, unknown>;
    const pid = record.pid;
    if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 1) continue;
    const info = readProc(pid);
    if (!info || info.state === 'Z' || !`${info.cmdline} `.includes(`${minionConfigDir} `)) continue;
    out.push({ jid, pid, fun: typeof record.fun === 'string' ? record.fun : String(record.fun) });
  }
  return out.sort((a, b) => a.pid - b.pid);
}
