import { isAbsolute, posix } from 'node:path';
import { FsImage } from './fs-image.js';
import { fdArg, stringArg, stringsIn, type Syscall } from './strace-parse.js';

/*
 * The logical file-system operations of a traced workload, below one base
 * directory, in program order: what ALICE calls the "logical operations"
 * of a trace. Paths come from strace's descriptor annotations (-y); file
 * identity across renames from our own descriptor table. Two kinds of marks
 * travel with them: a milestone (the workload stat()ed
 * `<base>/.crash-milestone/<name>`: a durable boundary it reached) and an
 * effect (it wrote under `<base>/.crash-effects/`: the state really ran).
 */

export const MILESTONE_DIR = '.crash-milestone';
export const EFFECT_DIR = '.crash-effects';

export type Operation =
  | { readonly kind: 'creat' | 'mkdir'; readonly dir: number; readonly name: string; readonly inode: number; readonly mode: number; readonly uid: number; readonly gid: number }
  | { readonly kind: 'write'; readonly inode: number; readonly offset: number; readonly data: Buffer }
  | { readonly kind: 'truncate'; readonly inode: number; readonly size: number }
  | { readonly kind: 'chmod'; readonly inode: number; readonly mode: number }
  | { readonly kind: 'fsync'; readonly inode: number }
  | { readonly kind: 'rename'; readonly fromDir: number; readonly fromName: string; readonly toDir: number; readonly toName: string; readonly inode: number }
  | { readonly kind: 'unlink'; readonly dir: number; readonly name: string; readonly inode: number }
  | { readonly kind: 'milestone'; readonly name: string }
  | { readonly kind: 'effect'; readonly name: string };

export interface OperationOptions {
  /** The directory the image stands for (absolute). */
  readonly base: string;
  /** The tree below base before the workload ran (its milestone and effect directories left out). */
  readonly initial: FsImage;
  /** The workload's umask (applied to creation modes). */
  readonly umask: number;
  readonly uid: number;
  readonly gid: number;
}

export interface Recording {
  readonly initial: FsImage;
  readonly operations: readonly Operation[];
  /** The image after every operation (program order, nothing lost): the state a clean run leaves. */
  readonly final: FsImage;
}

interface OpenFile {
  readonly inode: number;
  offset: number;
  readonly append: boolean;
}

const O_FLAG = (flags: string, name: string): boolean => flags.split('|').includes(name);

/** Applies one operation to an image, in program order (also used for crash states). */
export function applyOperation(image: FsImage, op: Operation, torn?: number): void {
  switch (op.kind) {
    case 'creat':
    case 'mkdir': {
      if (!image.inodes.has(op.inode)) allocate(image, op);
      image.inodes.get(op.dir)?.entries.set(op.name, op.inode);
      return;
    }
    case 'write': {
      const inode = image.inodes.get(op.inode);
      if (inode === undefined) return;
      const data = torn === undefined ? op.data : op.data.subarray(0, torn);
      const end = op.offset + data.length;
      const next = Buffer.alloc(Math.max(inode.data.length, end));
      inode.data.copy(next);
      data.copy(next, op.offset);
      inode.data = next;
      return;
    }
    case 'truncate': {
      const inode = image.inodes.get(op.inode);
      if (inode === undefined) return;
      const next = Buffer.alloc(op.size);
      inode.data.copy(next, 0, 0, Math.min(op.size, inode.data.length));
      inode.data = next;
      return;
    }
    case 'chmod': {
      const inode = image.inodes.get(op.inode);
      if (inode !== undefined) inode.mode = op.mode;
      return;
    }
    case 'rename': {
      const from = image.inodes.get(op.fromDir);
      if (from?.entries.get(op.fromName) === op.inode) from.entries.delete(op.fromName);
      image.inodes.get(op.toDir)?.entries.set(op.toName, op.inode);
      return;
    }
    case 'unlink': {
      const dir = image.inodes.get(op.dir);
      if (dir?.entries.get(op.name) === op.inode) dir.entries.delete(op.name);
      return;
    }
    case 'fsync':
    case 'milestone':
    case 'effect':
      return;
  }
}

/** A created inode, empty, with its creation mode and the workload's owner. */
export function allocate(image: FsImage, op: Extract<Operation, { kind: 'creat' | 'mkdir' }>): void {
  image.inodes.set(op.inode, {
    kind: op.kind === 'mkdir' ? 'dir' : 'file',
    mode: op.mode,
    uid: op.uid,
    gid: op.gid,
    data: Buffer.alloc(0),
    entries: new Map(),
  });
}

/** Turns a parsed trace into the operations below `base` (see the header). */
export function toOperations(calls: readonly Syscall[], options: OperationOptions): Recording {
  const { base } = options;
  const live = options.initial.clone();
  const operations: Operation[] = [];
  const files = new Map<number, OpenFile>();
  const effects = new Set<number>();
  let nextInode = live.nextInode();

  const relative = (path: string): string | undefined => {
    const normal = posix.normalize(path);
    if (normal === base) return '';
    return normal.startsWith(`${base}/`) ? normal.slice(base.length + 1) : undefined;
  };
  const resolve = (dirArg: string | undefined, nameArg: string): string => {
    const name = stringArg(nameArg).toString('utf8');
    if (isAbsolute(name)) return name;
    const dir = dirArg === undefined ? { path: undefined } : fdArg(dirArg);
    if (dir.path === undefined) throw new Error('a relative path without a descriptor path: run strace with -y');
    return posix.join(dir.path, name);
  };
  const emit = (op: Operation): void => {
    operations.push(op);
    applyOperation(live, op);
  };
  const parentOf = (rel: string): { dir: number; name: string } => {
    const dir = live.lookup(posix.dirname(rel) === '.' ? '' : posix.dirname(rel));
    if (dir === undefined) throw new Error(`the parent of ${rel} is not in the image`);
    return { dir, name: posix.basename(rel) };
  };
  const isMark = (rel: string, dir: string): boolean => rel === dir || rel.startsWith(`${dir}/`);
  const fileOf = (arg: string): { inode: number; open?: OpenFile } | 'effect' | undefined => {
    const { fd, path } = fdArg(arg);
    if (typeof fd === 'number' && effects.has(fd)) return 'effect';
    if (typeof fd === 'number') {
      const open = files.get(fd);
      if (open !== undefined) return { inode: open.inode, open };
    }
    const rel = path === undefined ? undefined : relative(path);
    if (rel === undefined) return undefined;
    if (isMark(rel, EFFECT_DIR)) return 'effect';
    const inode = live.lookup(rel);
    if (inode === undefined) throw new Error(`a descriptor for ${rel} that the image does not hold`);
    return { inode };
  };

  // Processes the workload forked (Salt's imports run helpers): they have
  // descriptor tables of their own, so they must not touch the tree at all.
  const forked = new Set<number>();
  const touchesBase = (call: Syscall): boolean =>
    call.args.some((arg) => {
      const paths = [...arg.matchAll(/<((?:\\x[0-9a-f]{2})+)>/g)].map((m) => stringArg(`"${m[1]}"`).toString('utf8'));
      if (arg.startsWith('"')) paths.push(stringArg(arg).toString('utf8'));
      return paths.some((p) => relative(p) !== undefined);
    });
  for (const call of calls) {
    const { name, args } = call;
    if (forked.has(call.pid)) {
      if ((name === 'clone' || name === 'clone3' || name === 'fork' || name === 'vfork') && call.ret > 0) forked.add(call.ret);
      if (touchesBase(call)) throw new Error(`a process the workload forked (${name}) touched the recorded tree: trace one process`);
      continue;
    }
    if (name === 'clone' || name === 'clone3' || name === 'fork' || name === 'vfork') {
      if (call.ret > 0 && !(args[0] ?? '').includes('CLONE_FILES')) forked.add(call.ret);
      continue;
    }
    if (name === 'newfstatat' || name === 'statx' || name === 'stat' || name === 'lstat' || name === 'access' || name === 'faccessat' || name === 'faccessat2') {
      const path = name === 'stat' || name === 'lstat' || name === 'access' ? resolve(undefined, args[0] as string) : resolve(args[0], args[1] as string);
      const rel = relative(path);
      if (rel !== undefined && rel.startsWith(`${MILESTONE_DIR}/`)) operations.push({ kind: 'milestone', name: rel.slice(MILESTONE_DIR.length + 1) });
      continue;
    }
    if (call.ret === -1 || Number.isNaN(call.ret)) continue; // a failed call changed nothing
    switch (name) {
      case 'openat':
      case 'open':
      case 'creat': {
        const path = name === 'openat' ? resolve(args[0], args[1] as string) : resolve(undefined, args[0] as string);
        const rel = relative(path);
        if (rel === undefined) break;
        if (isMark(rel, EFFECT_DIR)) {
          effects.add(call.ret);
          break;
        }
        if (isMark(rel, MILESTONE_DIR)) break;
        const flags = name === 'creat' ? 'O_CREAT|O_WRONLY|O_TRUNC' : ((name === 'openat' ? args[2] : args[1]) as string);
        let inode = live.lookup(rel);
        if (inode === undefined) {
          if (!O_FLAG(flags, 'O_CREAT')) throw new Error(`${rel} was opened but the image does not hold it`);
          const mode = Number.parseInt((name === 'openat' ? args[3] : name === 'creat' ? args[1] : args[2]) ?? '0', 8) & ~options.umask & 0o7777;
          inode = nextInode++;
          const { dir, name: entry } = parentOf(rel);
          emit({ kind: 'creat', dir, name: entry, inode, mode, uid: options.uid, gid: options.gid });
        } else if (O_FLAG(flags, 'O_TRUNC') && live.inode(inode).kind === 'file') {
          emit({ kind: 'truncate', inode, size: 0 });
        }
        if (live.inode(inode).kind === 'file') files.set(call.ret, { inode, offset: 0, append: O_FLAG(flags, 'O_APPEND') });
        else files.delete(call.ret);
        break;
      }
      case 'close':
        files.delete(fdArg(args[0] as string).fd as number);
        effects.delete(fdArg(args[0] as string).fd as number);
        break;
      case 'dup':
      case 'dup2':
      case 'dup3':
      case 'fcntl': {
        if (name === 'fcntl' && !(args[1] ?? '').startsWith('F_DUPFD')) break;
        const from = fdArg(args[0] as string).fd as number;
        const open = files.get(from);
        if (open !== undefined) files.set(call.ret, open);
        if (effects.has(from)) effects.add(call.ret);
        break;
      }
      case 'write':
      case 'pwrite64':
      case 'writev':
      case 'pwritev':
      case 'pwritev2': {
        const target = fileOf(args[0] as string);
        if (target === undefined) break;
        if (target === 'effect') {
          operations.push({ kind: 'effect', name: 'execution' });
          break;
        }
        const chunks = name === 'write' || name === 'pwrite64' ? [stringArg(args[1] as string)] : stringsIn(args[1] as string);
        const data = Buffer.concat(chunks).subarray(0, call.ret);
        const positioned = name === 'pwrite64' || name === 'pwritev' || name === 'pwritev2';
        const open = target.open;
        let offset = positioned ? Number(args[3] ?? args[2]) : (open?.offset ?? 0);
        if (open?.append === true && !positioned) offset = live.inode(target.inode).data.length;
        emit({ kind: 'write', inode: target.inode, offset, data });
        if (open !== undefined && !positioned) open.offset = offset + data.length;
        break;
      }
      case 'ftruncate': {
        const target = fileOf(args[0] as string);
        if (target === undefined || target === 'effect') break;
        emit({ kind: 'truncate', inode: target.inode, size: Number(args[1]) });
        break;
      }
      case 'fchmod': {
        const target = fileOf(args[0] as string);
        if (target === undefined || target === 'effect') break;
        emit({ kind: 'chmod', inode: target.inode, mode: Number.parseInt(args[1] as string, 8) });
        break;
      }
      case 'chmod':
      case 'fchmodat': {
        const path = name === 'chmod' ? resolve(undefined, args[0] as string) : resolve(args[0], args[1] as string);
        const rel = relative(path);
        if (rel === undefined || isMark(rel, EFFECT_DIR)) break;
        const inode = live.lookup(rel);
        if (inode === undefined) throw new Error(`chmod of ${rel}, which the image does not hold`);
        emit({ kind: 'chmod', inode, mode: Number.parseInt((name === 'chmod' ? args[1] : args[2]) as string, 8) });
        break;
      }
      case 'fsync':
      case 'fdatasync': {
        const target = fileOf(args[0] as string);
        if (target === undefined || target === 'effect') break;
        emit({ kind: 'fsync', inode: target.inode });
        break;
      }
      case 'rename':
      case 'renameat':
      case 'renameat2': {
        const from = name === 'rename' ? resolve(undefined, args[0] as string) : resolve(args[0], args[1] as string);
        const to = name === 'rename' ? resolve(undefined, args[1] as string) : resolve(args[2], args[3] as string);
        const [fromRel, toRel] = [relative(from), relative(to)];
        if (fromRel === undefined && toRel === undefined) break;
        if (fromRel === undefined || toRel === undefined) throw new Error('a rename across the base directory');
        if ((args[4] ?? '').includes('RENAME_EXCHANGE')) throw new Error('RENAME_EXCHANGE is not modelled');
        const inode = live.lookup(fromRel);
        if (inode === undefined) throw new Error(`rename of ${fromRel}, which the image does not hold`);
        const source = parentOf(fromRel);
        const target = parentOf(toRel);
        emit({ kind: 'rename', fromDir: source.dir, fromName: source.name, toDir: target.dir, toName: target.name, inode });
        break;
      }
      case 'unlink':
      case 'unlinkat':
      case 'rmdir': {
        const path = name === 'unlinkat' ? resolve(args[0], args[1] as string) : resolve(undefined, args[0] as string);
        const rel = relative(path);
        if (rel === undefined || isMark(rel, EFFECT_DIR)) break;
        const inode = live.lookup(rel);
        if (inode === undefined) throw new Error(`unlink of ${rel}, which the image does not hold`);
        const { dir, name: entry } = parentOf(rel);
        emit({ kind: 'unlink', dir, name: entry, inode });
        break;
      }
      case 'mkdir':
      case 'mkdirat': {
        const path = name === 'mkdirat' ? resolve(args[0], args[1] as string) : resolve(undefined, args[0] as string);
        const rel = relative(path);
        if (rel === undefined || isMark(rel, EFFECT_DIR) || isMark(rel, MILESTONE_DIR)) break;
        const mode = Number.parseInt((name === 'mkdirat' ? args[2] : args[1]) as string, 8) & ~options.umask & 0o7777;
        const { dir, name: entry } = parentOf(rel);
        const inode = nextInode++;
        emit({ kind: 'mkdir', dir, name: entry, inode, mode, uid: options.uid, gid: options.gid });
        break;
      }
      case 'link':
      case 'linkat':
      case 'symlink':
      case 'symlinkat': {
        const paths = args.filter((a) => a.startsWith('"')).map((a) => stringArg(a).toString('utf8'));
        if (paths.some((p) => relative(p) !== undefined)) throw new Error(`${name} below the base directory is not modelled`);
        break;
      }
      default:
        break;
    }
  }
  return { initial: options.initial, operations, final: live };
}
