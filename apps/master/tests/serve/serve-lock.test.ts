import { createFileRecordStore, migrateFileRecordStore, MasterRunnerError } from '@oduflow/master-runner';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { holdServeLock } from '../../src/serve/serve-lock.js';

let dir: string;
let root: string;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'oduflow-serve-lock-'));
  chmodSync(dir, 0o700);
  root = join(dir, 'store');
  await (await createFileRecordStore({ root })).close();
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function refusal(fn: () => unknown): MasterRunnerError {
  try {
    fn();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('the serve lock', () => {
  it('admits one holder per store: a second is refused without waiting, and the lock is free again once released', () => {
    const held = holdServeLock(root);
    const error = refusal(() => holdServeLock(root));
    expect(error).toMatchObject({ code: 'store_busy', detail: 'lock_busy' });
    expect(error.message).toContain('another oduflow-master serve is running');
    held.release();
    holdServeLock(root).release();
  });

  it('keeps migrate-store off the store while it is held', async () => {
    const held = holdServeLock(root);
    try {
      await expect(migrateFileRecordStore({ root, lockWaitMs: 100 })).rejects.toMatchObject({ code: 'store_busy' });
    } finally {
      held.release();
    }
    await expect(migrateFileRecordStore({ root, lockWaitMs: 100 })).resolves.toMatchObject({ wasCurrent: true });
  });
});
