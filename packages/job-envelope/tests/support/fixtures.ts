import { chmodSync, existsSync, lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobEnvelopeError } from '../../src/errors.js';
import type { JobSpecInput } from '../../src/spec.js';
import type { JobStage } from '../../src/stage.js';

/** A private scratch directory (0700) under the system temp dir, removed by `remove`. */
export function scratchDir(prefix = 'job-envelope-'): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o700);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export const STAGE_IDS = ['alpha', 'beta', 'gamma'] as const;

export function spec(overrides: Partial<JobSpecInput> = {}): JobSpecInput {
  return {
    job_type: 'rollout',
    spec_version: 1,
    dry_run: false,
    inputs: { profile: 'configure', targets: ['client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b'] },
    stage_ids: [...STAGE_IDS],
    workspace_identity: 'store:/var/lib/oduflow/master',
    ...overrides,
  };
}

/** Stages that do nothing but record, in `calls`, that they ran. */
export function recordingStages(ids: readonly string[] = STAGE_IDS, calls: string[] = []): JobStage[] {
  return ids.map((id) => ({ id, run: () => void calls.push(id) }));
}

/** The code of the JobEnvelopeError `action` throws (sync or async); fails the test on anything else. */
export async function codeOf(action: () => unknown): Promise<string> {
  try {
    await action();
  } catch (error) {
    if (JobEnvelopeError.isInstance(error)) return error.code;
    throw error;
  }
  throw new Error('expected a JobEnvelopeError, but nothing was thrown');
}

/** Every entry under `root` with its type, mode and content (for files), to prove nothing was written. */
export function snapshotTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!existsSync(root)) return out;
  const walk = (dir: string, rel: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const key = rel === '' ? name : `${rel}/${name}`;
      const st = lstatSync(path);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isDirectory()) {
        out[key] = `dir ${mode}`;
        walk(path, key);
      } else if (st.isFile()) {
        out[key] = `file ${mode} ${readFileSync(path, 'utf8')}`;
      } else {
        out[key] = `other ${mode}`;
      }
    }
  };
  walk(root, '');
  return out;
}

/** The run directories under a workspace. */
export function runDirs(workspace: string): string[] {
  const runs = join(workspace, 'runs');
  return existsSync(runs) ? readdirSync(runs).sort() : [];
}

export function readJsonFile(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}
