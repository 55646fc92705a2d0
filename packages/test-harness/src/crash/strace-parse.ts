/*
 * Parses the text strace writes with `-f -y -xx`: one system call per line,
 * `PID name(args) = ret`, every string hex-escaped (`"\x2f\x74"`) and every
 * file descriptor annotated with the path it had (`3<\x2f\x74\x6d\x70>`).
 * Calls split by a thread switch (`<unfinished ...>` / `<... name resumed>`)
 * are joined again. Only what the crash-state recorder needs is kept: the
 * name, the raw top-level arguments, the return value and its annotation.
 */

export interface Syscall {
  /** Position in the trace (after joining split calls). */
  readonly index: number;
  readonly pid: number;
  readonly name: string;
  /** Top-level arguments as strace printed them. */
  readonly args: readonly string[];
  /** -1 for a failed call (then `errno` says why); NaN when strace printed `?`. */
  readonly ret: number;
  readonly errno?: string;
  /** The path annotation of a returned descriptor (`= 3</path>`). */
  readonly retPath?: string;
}

const LINE = /^(\d+)\s+(.*)$/;
const UNFINISHED = ' <unfinished ...>';
const RESUMED = /^<\.\.\. ([a-z0-9_]+) resumed>(.*)$/;

/** Decodes the escapes strace uses (-xx prints every byte as \xHH; the others for safety). */
function unescapeBytes(body: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c !== '\\') {
      for (const b of Buffer.from(c, 'utf8')) bytes.push(b);
      continue;
    }
    const next = body[++i] as string;
    if (next === 'x') {
      bytes.push(Number.parseInt(body.slice(i + 1, i + 3), 16));
      i += 2;
    } else if (next >= '0' && next <= '7') {
      let digits = next;
      while (digits.length < 3 && /[0-7]/.test(body[i + 1] ?? '')) digits += body[++i] ?? '';
      bytes.push(Number.parseInt(digits, 8));
    } else {
      const simple: Record<string, number> = { n: 10, t: 9, r: 13, v: 11, f: 12, '"': 34, '\\': 92 };
      const code = simple[next];
      if (code === undefined) throw new Error(`unknown strace escape \\${next}`);
      bytes.push(code);
    }
  }
  return Buffer.from(bytes);
}

/** A quoted strace string argument as bytes; throws when strace truncated it (`"..."...`). */
export function stringArg(arg: string): Buffer {
  const trimmed = arg.trim();
  if (!trimmed.startsWith('"')) throw new Error(`not a string argument: ${trimmed.slice(0, 40)}`);
  if (trimmed.endsWith('...')) throw new Error('strace truncated a string argument: raise -s');
  if (!trimmed.endsWith('"')) throw new Error(`unterminated string argument: ${trimmed.slice(0, 40)}`);
  return unescapeBytes(trimmed.slice(1, -1));
}

/** Every quoted string inside an argument (the iov_base of a writev), in order. */
export function stringsIn(arg: string): Buffer[] {
  const found: Buffer[] = [];
  const pattern = /"((?:[^"\\]|\\.)*)"(\.\.\.)?/g;
  for (const match of arg.matchAll(pattern)) {
    if (match[2] !== undefined) throw new Error('strace truncated a string argument: raise -s');
    found.push(unescapeBytes(match[1] as string));
  }
  return found;
}

/** The descriptor number and annotated path of an argument like `3<\x2f...>` or `AT_FDCWD<...>`. */
export function fdArg(arg: string): { fd: number | 'AT_FDCWD'; path?: string } {
  const match = /^\s*(-?\d+|AT_FDCWD)(?:<(.*)>)?\s*$/.exec(arg);
  if (match === null) throw new Error(`not a descriptor argument: ${arg.slice(0, 40)}`);
  const fd = match[1] === 'AT_FDCWD' ? 'AT_FDCWD' : Number(match[1]);
  return match[2] === undefined ? { fd } : { fd, path: unescapeBytes(match[2]).toString('utf8') };
}

/** Splits `a, "b,c", {x=1, y=2}, 3<p>` at its top-level commas. */
function splitArgs(text: string): string[] {
  const args: string[] = [];
  let depth = 0;
  let inString = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '(' || c === '[' || c === '{' || c === '<') depth++;
    else if (c === ')' || c === ']' || c === '}' || c === '>') depth--;
    else if (c === ',' && depth === 0) {
      args.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  const last = text.slice(start).trim();
  if (last !== '' || args.length > 0) args.push(last);
  return args;
}

/** Index of the parenthesis closing the argument list that opens at `open`. */
function closingParen(text: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '(') depth++;
    else if (c === ')') {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

function parseCall(pid: number, body: string, index: number): Syscall | undefined {
  const open = body.indexOf('(');
  if (open <= 0) return undefined;
  const name = body.slice(0, open);
  if (!/^[a-z0-9_]+$/.test(name)) return undefined;
  const close = closingParen(body, open);
  if (close < 0) throw new Error(`unbalanced strace line: ${body.slice(0, 80)}`);
  const args = splitArgs(body.slice(open + 1, close));
  const result = /^\s*=\s*(-?\d+|\?|0x[0-9a-f]+)(?:<(.*?)>)?(?:\s+([A-Z0-9_]+))?/.exec(body.slice(close + 1));
  if (result === null) return undefined; // killed mid-call: no result, nothing happened we can rely on
  const raw = result[1] as string;
  const ret = raw === '?' ? Number.NaN : raw.startsWith('0x') ? Number.parseInt(raw, 16) : Number(raw);
  const call: Syscall = {
    index,
    pid,
    name,
    args,
    ret,
    ...(result[3] !== undefined && ret === -1 ? { errno: result[3] } : {}),
    ...(result[2] !== undefined ? { retPath: unescapeBytes(result[2]).toString('utf8') } : {}),
  };
  return call;
}

/** The system calls of a trace, in the order they completed. */
export function parseStrace(text: string): Syscall[] {
  const pending = new Map<number, string>();
  const calls: Syscall[] = [];
  for (const line of text.split('\n')) {
    const match = LINE.exec(line);
    if (match === null) continue;
    const pid = Number(match[1]);
    let body = match[2] as string;
    if (body.startsWith('---') || body.startsWith('+++')) continue;
    // A call in progress when the tracer detached: its outcome is not in the trace.
    if (body.endsWith('<detached ...>')) continue;
    if (body.endsWith(UNFINISHED)) {
      pending.set(pid, body.slice(0, -UNFINISHED.length));
      continue;
    }
    const resumed = RESUMED.exec(body);
    if (resumed !== null) {
      const start = pending.get(pid);
      if (start === undefined) continue; // began before the trace did
      pending.delete(pid);
      body = start + (resumed[2] as string);
    }
    const call = parseCall(pid, body, calls.length);
    if (call !== undefined) calls.push(call);
  }
  return calls;
}
