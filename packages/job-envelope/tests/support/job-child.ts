import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CheckpointKind, type JobStage, readJob, runJob } from '../../src/index.js';

/*
 * A separate Node process that runs (or resumes) a small job whose stages
 * stand in for rollout batches, and SIGKILLs itself where it is told to.
 * Bundled by job-process.ts; argv[2] is a JSON ChildJob.
 *
 * Each stage has two targets. On its first entry it fixes a random request
 * id per target and saves them (ctx.saveState) before it "publishes" any;
 * publishing is idempotent per request id, like dispatch --request-id: a
 * `published/<target>` file holding the request id is created exclusively;
 * the same request id finds it again, another one is a second request for
 * that target. Every step is appended to the marker file:
 *
 *   enter <stage> <entry> <attempt>   publish <target> <request id>
 *   found <target> <request id>       second-request <target> <request id>
 *   done <stage>
 *
 * A stage entered without its saved state would draw new request ids and
 * the marker would show a second request for a target.
 */

export interface ChildJob {
  readonly workspace: string;
  /** Where the marker and published/ live. */
  readonly scratch: string;
  readonly resume?: string;
  readonly jobType?: string;
  /** SIGKILL right after this checkpoint (of stage `stageIndex` for the stage kinds). */
  readonly killAt?: { readonly kind: CheckpointKind; readonly stageIndex?: number };
  /** SIGKILL inside this stage, after its first target was published, on its first attempt. */
  readonly killMidStage?: string;
  /** Print HOLDING <run id> inside the first stage and block there until killed. */
  readonly hold?: boolean;
  /** Print the run id, then read the run back (readJob) and print its report instead of running. */
  readonly show?: string;
}

export const CHILD_STAGES = ['alpha', 'beta', 'gamma'] as const;
export const CHILD_SPEC = {
  job_type: 'rollout',
  spec_version: 1,
  dry_run: false,
  inputs: { profile: 'configure', targets: CHILD_STAGES.flatMap((stage) => [`${stage}-t1`, `${stage}-t2`]) },
  stage_ids: [...CHILD_STAGES],
  workspace_identity: 'test-workspace',
};

const job = JSON.parse(process.argv[2] ?? '{}') as ChildJob;
const marker = (line: string): void => appendFileSync(join(job.scratch, 'marker'), `${line}\n`);
const die = (): never => {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
};

function publish(target: string, requestId: string): void {
  mkdirSync(join(job.scratch, 'published'), { recursive: true });
  try {
    writeFileSync(join(job.scratch, 'published', target), requestId, { flag: 'wx' });
    marker(`publish ${target} ${requestId}`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    // The master finds the same request again; a new request id for a published target is a second apply.
    const existing = readFileSync(join(job.scratch, 'published', target), 'utf8');
    marker(existing === requestId ? `found ${target} ${requestId}` : `second-request ${target} ${requestId}`);
  }
}

const stages: JobStage[] = CHILD_STAGES.map((id) => ({
  id,
  run: (ctx) => {
    marker(`enter ${id} ${ctx.entry} ${ctx.attempt}`);
    if (job.hold === true) {
      process.stdout.write(`HOLDING ${ctx.runId}\n`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); // blocks until the parent's SIGKILL
    }
    let requests = (ctx.state as { requests?: Record<string, string> } | null)?.requests;
    if (requests === undefined) {
      requests = { [`${id}-t1`]: randomUUID(), [`${id}-t2`]: randomUUID() };
      ctx.saveState({ requests }); // fixed before anything is published
    }
    for (const [target, requestId] of Object.entries(requests)) {
      publish(target, requestId);
      if (job.killMidStage === id && ctx.attempt === 1) die();
    }
    marker(`done ${id}`);
  },
}));

function summarize({ stages: done }: { stages: readonly { state: unknown }[] }) {
  const targets = done.flatMap((stage) => Object.keys((stage.state as { requests?: Record<string, string> } | null)?.requests ?? {}));
  return { counts: { published: targets.length }, items: targets.map((id) => ({ id, state: 'published' })) };
}

async function main(): Promise<void> {
  mkdirSync(job.scratch, { recursive: true, mode: 0o700 });
  if (job.show !== undefined) {
    process.stdout.write(`REPORT ${JSON.stringify(readJob(job.workspace, job.show).report)}\n`);
    return;
  }
  const report = await runJob({ ...CHILD_SPEC, job_type: job.jobType ?? CHILD_SPEC.job_type }, stages, {
    workspace: job.workspace,
    ...(job.resume === undefined ? {} : { resume: job.resume }),
    summarize,
    onCheckpoint: (event) => {
      if (event.kind === 'start') process.stdout.write(`RUN ${event.runId}\n`);
      const at = job.killAt;
      if (at !== undefined && event.kind === at.kind && (at.stageIndex === undefined || event.stage?.index === at.stageIndex)) die();
    },
  });
  process.stdout.write(`REPORT ${JSON.stringify(report)}\n`);
}

main().catch((error: unknown) => {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unexpected';
  process.stdout.write(`ERROR ${code}\n`);
  process.exitCode = 3;
});
