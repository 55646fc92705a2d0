import { hostname, tmpdir, userInfo } from 'node:os';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { collectMachineFacts } from './facts.js';
import { reportLeaks } from './result.js';

describe('machine facts', () => {
  const facts = collectMachineFacts(resolve(import.meta.dirname, '..', '..', '..', '..'), tmpdir());

  it('names the CPU, cores, RAM, kernel, the versions that ran and the bench directory’s file system, in that order', () => {
    expect(facts.map(([label]) => label)).toEqual([
      'CPU',
      'cores',
      'RAM',
      'kernel',
      'Node.js',
      'Python',
      'Salt',
      'PostgreSQL',
      'file system of the bench directory (os.tmpdir())',
    ]);
    expect(facts.find(([label]) => label === 'Node.js')?.[1]).toBe(process.version);
    expect(facts.every(([, value]) => value.trim() !== '')).toBe(true);
  });

  it('carries no host name, user name or path', () => {
    const text = JSON.stringify(facts);
    expect(reportLeaks(text)).toEqual([]);
    // (A host name of a few characters could occur in a version string by chance.)
    if (hostname().length >= 6) expect(text).not.toContain(hostname());
    expect(text).not.toContain(userInfo().homedir);
  });
});
