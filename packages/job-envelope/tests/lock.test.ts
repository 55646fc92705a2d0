import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readJob } from '../src/read-job.js';
import { runJob } from '../src/run-job.js';
import { codeOf, recordingStages, runDirs, scratchDir, snapshotTree, spec } from './support/fixtures.js';
import { CHILD_SPEC, CHILD_STAGES } from './support/job-child.js';
import { type JobProcess, reportOf, runChild, startJob } from './support/job-process.js';

/*
 * The workspace job lock against a real second process: a kernel flock on
 * locks/<job_type>.lock, taken without waiting, dropped by the kernel when
 * its holder dies — no PID files, no stale-lock guesses.
 */

let root: string;
let workspace: string;
let remove: () => void;
const children: JobProcess[] = [];

beforeEach(() => {
  ({ dir: root, remove } = scratchDir('job-envelope-lock-'));
  workspace = join(root, 'ws');
});
afterEach(async () => {
  for (const child of children.splice(0)) await child.kill();
  remove();
});

function holder(jobType?: string): JobProcess {
  const child = startJob({ workspace, scratch: root, hold: true, ...(jobType === undefined ? {} : { jobType }) });
  children.push(child);
  return child;
}

const childStages = recordingStages(CHILD_STAGES);

describe('the workspace job lock held by another process', () => {
  it('refuses a second run of the same job type at once with job_locked, touching no run', async () => {
    const child = holder();
    const runId = await child.line('HOLDING ');
    const before = snapshotTree(workspace);
    const calls: string[] = [];
    expect(await codeOf(() => runJob(CHILD_SPEC, recordingStages(CHILD_STAGES, calls), { workspace }))).toBe('job_locked');
    expect(calls).toEqual([]);
    expect(snapshotTree(workspace)).toEqual(before);
    expect(runDirs(workspace)).toEqual([runId]);
  });

  it('lets a different job type run in the same workspace meanwhile', async () => {
    await holder().line('HOLDING ');
    const report = await runJob(spec({ job_type: 'migrate-store' }), recordingStages(), { workspace });
    expect(report.status).toBe('succeeded');
  });

  it('shows the held run as running, and as interrupted once the holder is SIGKILLed', async () => {
    const child = holder();
    const runId = await child.line('HOLDING ');
    expect(readJob(workspace, runId).status).toBe('running');
    expect((await child.kill()).signal).toBe('SIGKILL');
    expect(readJob(workspace, runId).status).toBe('interrupted');
  });

  it('is released by the kernel when the holder dies: a new run and a resume of the dead one both proceed', async () => {
    const child = holder();
    const runId = await child.line('HOLDING ');
    await child.kill();
    expect((await runJob(CHILD_SPEC, childStages, { workspace })).status).toBe('succeeded');
    const resumed = await runChild({ workspace, scratch: root, resume: runId });
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(reportOf(resumed)).toMatchObject({ status: 'succeeded', resumed_from: runId });
  });

  it('keeps a resume of the held run out while its runner lives', async () => {
    const child = holder();
    const runId = await child.line('HOLDING ');
    const before = snapshotTree(workspace);
    expect(await codeOf(() => runJob(CHILD_SPEC, childStages, { workspace, resume: runId }))).toBe('job_locked');
    expect(snapshotTree(workspace)).toEqual(before);
  });
});
