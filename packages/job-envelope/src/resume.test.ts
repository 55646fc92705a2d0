import { copyFileSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { STAGE_IDS, codeOf, readJsonFile, recordingStages, runDirs, scratchDir, snapshotTree, spec } from '../tests/support/fixtures.js';
import { interruptAt } from '../tests/support/interrupt.js';
import { type CompatibilityFields, resumeFingerprint, sha256Hex } from './fingerprint.js';
import { runJob } from './run-job.js';
import type { JobSpecInput } from './spec.js';

/*
 * Resume is read-only until the source checkpoint is proven consistent.
 * Every case below starts from a real run interrupted after its second stage
 * (alpha and beta succeeded, gamma pending), tampers with the checkpoint or
 * asks for a different job, and proves the resume is refused before any stage
 * runs and before anything is written: the whole workspace tree (every file's
 * bytes, every mode) is unchanged, so the runs directory has no orphan
 * allocation and the source carries no superseded marker.
 */

let root: string;
let workspace: string;
let remove: () => void;
let source: string;

beforeEach(async () => {
  ({ dir: root, remove } = scratchDir());
  workspace = join(root, 'ws');
  const stages = STAGE_IDS.map((id) => ({ id, run: (ctx: { saveState: (s: unknown) => void }) => ctx.saveState({ batch: id }) }));
  source = await interruptAt(spec(), stages as never, { workspace }, 'after_stage', 1);
});
afterEach(() => remove());

const file = (name: string): string => join(workspace, 'runs', source, name);
const header = (): Record<string, unknown> => readJsonFile(file('job.json'));
const writeJson = (name: string, value: unknown): void => writeFileSync(file(name), JSON.stringify(value));
const refit = (value: Record<string, unknown>): Record<string, unknown> => ({
  ...value,
  fingerprint: resumeFingerprint(value as unknown as CompatibilityFields),
});

async function expectRefused(code: string, requested: JobSpecInput = spec()): Promise<void> {
  const before = snapshotTree(workspace);
  const calls: string[] = [];
  expect(await codeOf(() => runJob(requested, recordingStages(requested.stage_ids, calls), { workspace, resume: source }))).toBe(code);
  expect(calls).toEqual([]);
  expect(runDirs(workspace)).toEqual([source]);
  expect(snapshotTree(workspace)).toEqual(before);
}

it('resumes the untouched checkpoint, running only the stage that had not run', async () => {
  const calls: string[] = [];
  const report = await runJob(spec(), recordingStages(STAGE_IDS, calls), { workspace, resume: source });
  expect(calls).toEqual(['gamma']);
  expect(report.status).toBe('succeeded');
});

describe('a stored compatibility field changed without its fingerprint', () => {
  const tampered: Record<string, unknown> = {
    schema_version: 2,
    workspace_identity_sha256: sha256Hex('another workspace'),
    job_type: 'migrate-store',
    dry_run: true,
    spec_version: 2,
    input_sha256: sha256Hex('{"profile":"production"}'),
    stage_ids: ['alpha', 'beta', 'delta'],
  };
  it.each(Object.keys(tampered))('is refused as corrupt_checkpoint: %s', async (field) => {
    writeJson('job.json', { ...header(), [field]: tampered[field] });
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused as corrupt_checkpoint when only the stored fingerprint changed', async () => {
    writeJson('job.json', { ...header(), fingerprint: sha256Hex('forged') });
    await expectRefused('corrupt_checkpoint');
  });
});

describe('a stored compatibility field changed with a recomputed fingerprint', () => {
  it.each([
    ['the workspace identity', { workspace_identity_sha256: sha256Hex('another workspace') }],
    ['the dry-run mode', { dry_run: true }],
    ['the spec version', { spec_version: 2 }],
    ['the input fingerprint', { input_sha256: sha256Hex('{"profile":"production"}') }],
  ])('is a consistent checkpoint of another job: resume_mismatch (%s)', async (_what, change) => {
    writeJson('job.json', refit({ ...header(), ...change }));
    await expectRefused('resume_mismatch');
  });

  it('is refused when it changes the job type (the stages still match their records): resume_mismatch', async () => {
    writeJson('job.json', refit({ ...header(), job_type: 'migrate-store' }));
    await expectRefused('resume_mismatch');
  });

  it.each([
    ['a stage inserted before the reached ones', ['delta', 'alpha', 'beta', 'gamma']],
    ['a reached stage removed', ['alpha', 'gamma']],
    ['two reached stages swapped', ['beta', 'alpha', 'gamma']],
    ['a reached stage substituted', ['alpha', 'delta', 'gamma']],
    ['a stage id duplicated', ['alpha', 'beta', 'gamma', 'alpha']],
  ])('is refused as corrupt_checkpoint: %s', async (_what, stageIds) => {
    writeJson('job.json', refit({ ...header(), stage_ids: stageIds }));
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused as resume_mismatch when only pending stages changed', async () => {
    writeJson('job.json', refit({ ...header(), stage_ids: ['alpha', 'beta', 'delta'] }));
    await expectRefused('resume_mismatch');
  });
});

describe('a stage record tampered with', () => {
  it('is refused when a reached stage record was removed', async () => {
    unlinkSync(file('stage-00000.json'));
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when a stage record was inserted for a stage never reached', async () => {
    const beta = readJsonFile(file('stage-00001.json'));
    writeFileSync(file('stage-00002.json'), JSON.stringify({ ...beta, index: 2, stage_id: 'gamma' }), { mode: 0o600 });
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when a record was duplicated under another position', async () => {
    copyFileSync(file('stage-00001.json'), file('stage-00002.json'));
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when two records were swapped', async () => {
    renameSync(file('stage-00000.json'), file('swap'));
    renameSync(file('stage-00001.json'), file('stage-00000.json'));
    renameSync(file('swap'), file('stage-00001.json'));
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when a record names another stage', async () => {
    writeJson('stage-00001.json', { ...readJsonFile(file('stage-00001.json')), stage_id: 'gamma' });
    await expectRefused('corrupt_checkpoint');
  });

  it.each([
    ['an unknown status', { status: 'done' }],
    ['a succeeded stage without finished_at', { finished_at: null }],
    ['a succeeded stage with an error', { error: { category: 'internal', code: 'stage_exception', message: 'stage execution failed' } }],
    ['a failed stage with an exception message', { status: 'failed', error: { category: 'internal', code: 'stage_exception', message: 'ECONNREFUSED 10.0.0.5' } }],
    ['zero attempts', { attempts: 0 }],
    ['a timestamp with an offset', { started_at: '2026-11-29T11:00:00.000+01:00' }],
    ['a stage that finished before it started', { finished_at: '2000-01-01T00:00:00.000Z' }],
    ['a state outside canonical JSON', { state: { ratio: 0.5 } }],
    ['a field the envelope never writes', { comment: 'changed by hand' }],
  ])('is refused as corrupt_checkpoint: %s', async (_what, change) => {
    writeJson('stage-00001.json', { ...readJsonFile(file('stage-00001.json')), ...change });
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when the second stage started before the first finished', async () => {
    const alpha = readJsonFile(file('stage-00000.json'));
    writeJson('stage-00001.json', { ...readJsonFile(file('stage-00001.json')), started_at: alpha['started_at'] });
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when a file is not JSON', async () => {
    writeFileSync(file('stage-00000.json'), '{"schema_version":1,');
    await expectRefused('corrupt_checkpoint');
  });

  it('is refused when the run directory holds an entry the envelope never writes', async () => {
    writeFileSync(file('notes.txt'), 'hello', { mode: 0o600 });
    await expectRefused('corrupt_checkpoint');
  });
});

describe('a different job asking to resume', () => {
  it.each([
    ['other inputs', spec({ inputs: { profile: 'production', targets: [] } })],
    ['the other mode', spec({ dry_run: true })],
    ['another spec version', spec({ spec_version: 2 })],
    ['another workspace identity', spec({ workspace_identity: 'store:/srv/elsewhere' })],
    ['another job type', spec({ job_type: 'migrate-store' })],
    ['a stage inserted', spec({ stage_ids: ['alpha', 'beta', 'delta', 'gamma'] })],
    ['a stage removed', spec({ stage_ids: ['alpha', 'beta'] })],
    ['stages reordered', spec({ stage_ids: ['beta', 'alpha', 'gamma'] })],
  ])('is refused with resume_mismatch: %s', async (_what, requested) => {
    await expectRefused('resume_mismatch', requested);
  });
});

it('reads the source again under the lock: a resume that lost the race sees the marker and is refused', async () => {
  const winner = await runJob(spec(), recordingStages(), { workspace, resume: source });
  const before = snapshotTree(workspace);
  expect(await codeOf(() => runJob(spec(), recordingStages(), { workspace, resume: source }))).toBe('run_superseded');
  expect(snapshotTree(workspace)).toEqual(before);
  expect(readFileSync(file('superseded.json'), 'utf8')).toContain(winner.run_id);
});
