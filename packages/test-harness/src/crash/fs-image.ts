import { createHash } from 'node:crypto';
import { chmodSync, chownSync, linkSync, lstatSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/*
 * A file-system tree as inodes and directory entries, in memory: what the
 * persistence model builds crash states from. Inodes keep an identity, so a
 * rename moves an inode and a crash state may hold the same inode under two
 * names (materialized as a hard link, which the stores must refuse).
 */

export interface Inode {
  readonly kind: 'file' | 'dir';
  mode: number;
  uid: number;
  gid: number;
  data: Buffer;
  /** A directory's entries: name → inode id. */
  readonly entries: Map<string, number>;
}

const ROOT_INODE = 0;

export class FsImage {
  readonly inodes = new Map<number, Inode>();

  static empty(mode: number, uid: number, gid: number): FsImage {
    const image = new FsImage();
    image.inodes.set(ROOT_INODE, { kind: 'dir', mode, uid, gid, data: Buffer.alloc(0), entries: new Map() });
    return image;
  }

  clone(): FsImage {
    const copy = new FsImage();
    for (const [id, inode] of this.inodes) copy.inodes.set(id, { ...inode, data: inode.data, entries: new Map(inode.entries) });
    return copy;
  }

  inode(id: number): Inode {
    const inode = this.inodes.get(id);
    if (inode === undefined) throw new Error(`no inode ${id} in the image`);
    return inode;
  }

  /** The inode at a path relative to the root ('' is the root), following no links. */
  lookup(relative: string): number | undefined {
    let id = ROOT_INODE;
    for (const name of relative.split('/').filter((part) => part !== '')) {
      const inode = this.inodes.get(id);
      if (inode === undefined || inode.kind !== 'dir') return undefined;
      const next = inode.entries.get(name);
      if (next === undefined) return undefined;
      id = next;
    }
    return id;
  }

  /** Reachable entries, depth first, sorted: [relative path, inode id]. */
  walk(): [string, number][] {
    const found: [string, number][] = [];
    const visit = (id: number, prefix: string, seen: Set<number>): void => {
      const inode = this.inode(id);
      for (const name of [...inode.entries.keys()].sort()) {
        const child = inode.entries.get(name) as number;
        const path = prefix === '' ? name : `${prefix}/${name}`;
        found.push([path, child]);
        const node = this.inodes.get(child);
        if (node?.kind === 'dir' && !seen.has(child)) visit(child, path, new Set([...seen, child]));
      }
    };
    visit(ROOT_INODE, '', new Set([ROOT_INODE]));
    return found;
  }

  /** A stable digest of what a reader of this tree can see (paths, kinds, modes, owners, bytes, links). */
  fingerprint(): string {
    const hash = createHash('sha256');
    const names = new Map<number, string>();
    for (const [path, id] of this.walk()) {
      const inode = this.inode(id);
      const link = names.get(id);
      if (link === undefined) names.set(id, path);
      const body = inode.kind === 'dir' ? '' : createHash('sha256').update(inode.data).digest('hex');
      hash.update(`${path}\0${inode.kind}\0${inode.mode.toString(8)}\0${inode.uid}:${inode.gid}\0${body}\0${link ?? ''}\n`);
    }
    const root = this.inode(ROOT_INODE);
    hash.update(`/\0${root.mode.toString(8)}\0${root.uid}:${root.gid}`);
    return hash.digest('hex');
  }

  /**
   * Writes the reachable tree below `target` (an existing, empty directory
   * that stands for the root): directories, files with their bytes, exact
   * modes and owners, and a second name of an inode as a hard link.
   */
  materialize(target: string): void {
    const written = new Map<number, string>();
    for (const [path, id] of this.walk()) {
      const inode = this.inode(id);
      const full = join(target, path);
      const first = written.get(id);
      if (first !== undefined) {
        linkSync(first, full);
        continue;
      }
      written.set(id, full);
      if (inode.kind === 'dir') mkdirSync(full);
      else writeFileSync(full, inode.data);
      chownSync(full, inode.uid, inode.gid);
      chmodSync(full, inode.mode);
    }
  }

  /** The image of the tree below `path` on disk, leaving out the root's entries named in `excluded`. */
  static snapshot(path: string, excluded: ReadonlySet<string> = new Set()): FsImage {
    const root = lstatSync(path);
    const image = FsImage.empty(root.mode & 0o7777, root.uid, root.gid);
    const byInode = new Map<number, number>();
    let next = ROOT_INODE + 1;
    const visit = (dir: string, dirId: number, top: boolean): void => {
      for (const name of readdirSync(dir).sort()) {
        if (top && excluded.has(name)) continue;
        const full = join(dir, name);
        const st = lstatSync(full);
        if (!st.isDirectory() && !st.isFile()) throw new Error(`the crash-state image holds only files and directories: ${full}`);
        let id = byInode.get(st.ino);
        if (id === undefined) {
          id = next++;
          byInode.set(st.ino, id);
          image.inodes.set(id, {
            kind: st.isDirectory() ? 'dir' : 'file',
            mode: st.mode & 0o7777,
            uid: st.uid,
            gid: st.gid,
            data: st.isDirectory() ? Buffer.alloc(0) : readFileSync(full),
            entries: new Map(),
          });
          if (st.isDirectory()) visit(full, id, false);
        }
        image.inode(dirId).entries.set(name, id);
      }
    };
    visit(path, ROOT_INODE, true);
    return image;
  }

  /** The next free inode id. */
  nextInode(): number {
    return Math.max(...this.inodes.keys()) + 1;
  }
}
