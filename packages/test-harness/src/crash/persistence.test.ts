import { describe, expect, it } from 'vitest';
import { FsImage } from './fs-image.js';
import { applyOperation, type Operation, type Recording } from './operations.js';
import { crashStates } from './persistence.js';
import { parseStrace } from './strace-parse.js';

/** An atomic write of `f` in the root directory: temp, write, fsync, rename, and (when `dirSync`) fsync of the directory. */
function atomicWrite(dirSync: boolean): Recording {
  const initial = FsImage.empty(0o700, 0, 0);
  const ops: Operation[] = [
    { kind: 'creat', dir: 0, name: '.tmp', inode: 1, mode: 0o600, uid: 0, gid: 0 },
    { kind: 'write', inode: 1, offset: 0, data: Buffer.from('{"v":2}') },
    { kind: 'fsync', inode: 1 },
    { kind: 'rename', fromDir: 0, fromName: '.tmp', toDir: 0, toName: 'f', inode: 1 },
    ...(dirSync ? [{ kind: 'fsync', inode: 0 } as const] : []),
    { kind: 'milestone', name: 'done' },
  ];
  const final = initial.clone();
  for (const op of ops) applyOperation(final, op);
  return { initial, operations: ops, final };
}

const contentOf = (image: FsImage): string | undefined => {
  const id = image.lookup('f');
  return id === undefined ? undefined : image.inode(id).data.toString('utf8');
};

describe('the persistence model', () => {
  it('keeps a renamed file once its directory was fsynced after the rename', () => {
    const afterDone = [...crashStates(atomicWrite(true), { mode: 'full' })].filter((s) => s.after === 'done');
    expect(afterDone.length).toBeGreaterThan(0);
    for (const state of afterDone) expect(contentOf(state.image)).toBe('{"v":2}');
  });

  it('may lose a rename whose directory was never fsynced, even after the call returned', () => {
    const afterDone = [...crashStates(atomicWrite(false), { mode: 'full' })].filter((s) => s.after === 'done');
    expect(afterDone.map((s) => contentOf(s.image))).toContain(undefined);
  });

  it('tears or loses an un-fsynced write but never a fsynced one', () => {
    const states = [...crashStates(atomicWrite(true), { mode: 'full' })];
    const beforeFsync = states.filter((s) => s.prefix === 2).map((s) => s.image.inode(1).data.toString('utf8'));
    expect(new Set(beforeFsync)).toEqual(new Set(['', '{"v', '{"v":2}']));
    for (const state of states.filter((s) => s.prefix >= 3)) expect(state.image.inode(1).data.toString('utf8')).toBe('{"v":2}');
  });

  it('explores every prefix, from nothing issued to everything', () => {
    const prefixes = new Set([...crashStates(atomicWrite(true), { mode: 'smoke' })].map((s) => s.prefix));
    expect([...prefixes].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });
});

describe('the strace parser', () => {
  it('joins a call split by a thread switch and decodes hex strings and descriptor paths', () => {
    const calls = parseStrace(
      [
        '12 openat(3<\\x2f\\x74>, "\\x61", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0600 <unfinished ...>',
        '13 epoll_wait(9, [], 1024, 0) = 0',
        '12 <... openat resumed>) = 4<\\x2f\\x74\\x2f\\x61>',
        '12 write(4<\\x2f\\x74\\x2f\\x61>, "\\x7b\\x7d", 2) = 2',
        '12 newfstatat(AT_FDCWD<\\x2f>, "\\x2f\\x6d", 0x7ff, 0) = -1 ENOENT (No such file or directory)',
        '12 +++ exited with 0 +++',
      ].join('\n'),
    );
    expect(calls.map((c) => c.name)).toEqual(['epoll_wait', 'openat', 'write', 'newfstatat']);
    expect(calls[1]).toMatchObject({ ret: 4, retPath: '/t/a', args: ['3<\\x2f\\x74>', '"\\x61"', 'O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC', '0600'] });
    expect(calls[3]).toMatchObject({ ret: -1, errno: 'ENOENT' });
  });
});
