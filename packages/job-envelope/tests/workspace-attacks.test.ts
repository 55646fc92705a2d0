import { chmodSync, chownSync, linkSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listJobs, readJob } from '../src/read-job.js';
import { runJob } from '../src/run-job.js';
import { codeOf, recordingStages, runDirs, scratchDir, snapshotTree, spec } from './support/fixtures.js';
import { interruptAt } from './support/interrupt.js';

/*
 * Symlink, hard-link, ownership and mode attacks on the workspace. Every
 * directory must be ours and 0700, every file ours, 0600, with one link,
 * and nothing is ever followed: each attack is refused with
 * unsafe_workspace and the attacker's target is left untouched.
 */

const isRoot = process.geteuid?.() === 0;
const NOBODY = 65534;

let root: string;
let workspace: string;
let remove: () => void;

beforeEach(() => {
  ({ dir: root, remove } = scratchDir('job-envelope-attack-'));
  workspace = join(root, 'ws');
});
afterEach(() => remove());

/** A directory the attacker wants us to write into, private so only the symlink could lead there. */
function elsewhere(): string {
  const dir = join(root, 'elsewhere');
  mkdirSync(dir, { mode: 0o700 });
  chmodSync(dir, 0o700);
  return dir;
}

async function interrupted(): Promise<string> {
  return interruptAt(spec(), recordingStages(), { workspace }, 'after_stage', 0);
}

const runFile = (runId: string, name: string): string => join(workspace, 'runs', runId, name);

describe('the workspace directory', () => {
  it('refuses a workspace that is a symlink, and writes nothing where it points', async () => {
    const target = elsewhere();
    symlinkSync(target, workspace);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('unsafe_workspace');
    expect(snapshotTree(target)).toEqual({});
  });

  it('refuses a workspace readable by others', async () => {
    mkdirSync(workspace, { mode: 0o755 });
    chmodSync(workspace, 0o755);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('unsafe_workspace');
    expect(snapshotTree(workspace)).toEqual({});
  });

  it('refuses a workspace under an ancestor anyone may write to without the sticky bit', async () => {
    const open = join(root, 'open');
    mkdirSync(open, { mode: 0o777 });
    chmodSync(open, 0o777);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace: join(open, 'ws') }))).toBe('unsafe_workspace');
  });

  // chown to another uid needs root; the test suite runs as root (README), so a non-root run would not exercise this.
  it.runIf(isRoot)('refuses a workspace owned by another user', async () => {
    mkdirSync(workspace, { mode: 0o700 });
    chownSync(workspace, NOBODY, NOBODY);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('unsafe_workspace');
    expect(await codeOf(() => listJobs(workspace))).toBe('unsafe_workspace');
  });
});

describe('directories inside the workspace', () => {
  it('refuses a runs directory replaced by a symlink', async () => {
    await runJob(spec(), recordingStages(), { workspace });
    const target = elsewhere();
    renameSync(join(workspace, 'runs'), join(root, 'moved-runs'));
    symlinkSync(target, join(workspace, 'runs'));
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('unsafe_workspace');
    expect(await codeOf(() => listJobs(workspace))).toBe('unsafe_workspace');
    expect(snapshotTree(target)).toEqual({});
  });

  it('refuses a locks directory replaced by a symlink', async () => {
    await runJob(spec(), recordingStages(), { workspace });
    const target = elsewhere();
    renameSync(join(workspace, 'locks'), join(root, 'moved-locks'));
    symlinkSync(target, join(workspace, 'locks'));
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('unsafe_workspace');
    expect(snapshotTree(target)).toEqual({});
  });

  it('refuses to resume or read a run directory that is a symlink to a copy elsewhere', async () => {
    const source = await interrupted();
    const copy = join(root, 'copy');
    renameSync(join(workspace, 'runs', source), copy);
    symlinkSync(copy, join(workspace, 'runs', source));
    const before = snapshotTree(copy);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: source }))).toBe('unsafe_workspace');
    expect(await codeOf(() => readJob(workspace, source))).toBe('unsafe_workspace');
    expect(snapshotTree(copy)).toEqual(before);
    expect(runDirs(workspace)).toEqual([source]);
  });

  it('refuses a run directory with group or other permissions', async () => {
    const source = await interrupted();
    chmodSync(join(workspace, 'runs', source), 0o750);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: source }))).toBe('unsafe_workspace');
  });
});

describe('files inside a run', () => {
  it('refuses a stage record that is a symlink, reading nothing through it', async () => {
    const source = await interrupted();
    const planted = join(root, 'planted.json');
    writeFileSync(planted, readFileSync(runFile(source, 'stage-00000.json')), { mode: 0o600 });
    renameSync(runFile(source, 'stage-00000.json'), join(root, 'original.json'));
    symlinkSync(planted, runFile(source, 'stage-00000.json'));
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: source }))).toBe('unsafe_workspace');
    expect(await codeOf(() => readJob(workspace, source))).toBe('unsafe_workspace');
    expect(runDirs(workspace)).toEqual([source]);
  });

  it('refuses a header with a second hard link', async () => {
    const source = await interrupted();
    linkSync(runFile(source, 'job.json'), join(root, 'second-link'));
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: source }))).toBe('unsafe_workspace');
    expect(runDirs(workspace)).toEqual([source]);
  });

  it('refuses a stage record readable by others', async () => {
    const source = await interrupted();
    chmodSync(runFile(source, 'stage-00000.json'), 0o644);
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: source }))).toBe('unsafe_workspace');
  });

  it.runIf(isRoot)('refuses a stage record owned by another user', async () => {
    const source = await interrupted();
    chownSync(runFile(source, 'stage-00000.json'), NOBODY, NOBODY);
    expect(await codeOf(() => readJob(workspace, source))).toBe('unsafe_workspace');
  });

  it('refuses a job lock file that is a symlink, and never creates or locks its target', async () => {
    await runJob(spec(), recordingStages(), { workspace });
    const target = join(elsewhere(), 'victim');
    renameSync(join(workspace, 'locks', 'rollout.lock'), join(root, 'old.lock'));
    symlinkSync(target, join(workspace, 'locks', 'rollout.lock'));
    expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace }))).toBe('unsafe_workspace');
    expect(snapshotTree(join(root, 'elsewhere'))).toEqual({});
  });
});
