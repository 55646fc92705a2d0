import { RequestRecordSchema, type ProtocolRequestRecord } from '@oduflow/protocol';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { decodeRecord, encodeRecord, LEGACY_RECONCILIATION_KEY } from '../src/record-codec.js';
import { MasterRunnerError } from '../src/errors.js';

interface AtRest {
  readonly description: string;
  readonly stored: Record<string, unknown>;
  readonly reason: unknown;
}

const written = JSON.parse(readFileSync(new URL('./fixtures/records-written-by-0.1.0.json', import.meta.url), 'utf8')) as { records: AtRest[] };

function refusalOf(fn: () => unknown): MasterRunnerError {
  try {
    fn();
  } catch (error) {
    if (MasterRunnerError.isInstance(error)) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('records written by master-runner 0.1.0', () => {
  it('are all there (the file is the snapshot of that shape)', () => {
    expect(written.records.length).toBeGreaterThanOrEqual(20);
    for (const { stored } of written.records) expect(Object.keys(stored)).toHaveLength(16);
  });

  it.each(written.records.map((r) => [r.description, r] as const))('read: %s', (_description, { stored, reason }) => {
    const record = decodeRecord(stored, stored['request_id'] as string) as ProtocolRequestRecord;
    expect(record).toStrictEqual({ ...stored, reason });
    expect(RequestRecordSchema.safeParse(record).success).toBe(true);
  });

  it.each(written.records.map((r) => [r.description, r] as const))('written back in the current shape and read again unchanged: %s', (_d, { stored }) => {
    const id = stored['request_id'] as string;
    const once = decodeRecord(stored, id);
    const again = decodeRecord(JSON.parse(JSON.stringify(encodeRecord(once))), id);
    expect(again).toStrictEqual(once);
  });
});

describe('decodeRecord', () => {
  const sound = written.records[0]?.stored as Record<string, unknown>;
  const id = sound['request_id'] as string;

  it.each([
    ['protocol 2', { ...sound, protocol: 2 }, 'names a protocol this runner does not speak'],
    ['protocol "1"', { ...sound, protocol: '1' }, 'names a protocol this runner does not speak'],
    ['protocol 0', { status: 'sent', protocol: 0 }, 'names a protocol this runner does not speak'],
    ['protocol null', { status: 'sent', protocol: null }, 'names a protocol this runner does not speak'],
    ['a reason 0.1.0 never wrote', { ...sound, reason: 'publish_eaten_by_grue' }, 'is not a valid protocol 1 record (field "reason")'],
    ['a free-text reason', { ...sound, reason: 'hunter2 is the password' }, 'is not a valid protocol 1 record (field "reason")'],
    ['an extra key', { ...sound, 'password=hunter2': 'x' }, 'has fields outside a protocol 1 record'],
    ['a missing key', (({ total: _t, ...rest }) => rest)(sound), 'is not a valid protocol 1 record (field "total")'],
    ['counts on a prepared request', { ...sound, passed: 1, total: 1 }, 'is not a valid protocol 1 record (field "passed")'],
    ['an array', [sound], 'is not a JSON object'],
  ])('refuses %s as store_corrupt, never as legacy, without echoing it', (_label, raw, what) => {
    const error = refusalOf(() => decodeRecord(raw, id));
    expect(error.code).toBe('store_corrupt');
    expect(error.message).toBe(`stored record ${id} ${what}`);
    expect(error.message).not.toContain('hunter2');
  });

  it('refuses a record stored under another request id', () => {
    expect(refusalOf(() => decodeRecord(sound, '1d2e3f40-5a6b-4c7d-8e9f-a0b1c2d3e4f5')).message).toContain('is stored under another request id');
  });

  it('reads a record without a protocol key as legacy, with its target and the state it recorded', () => {
    const original = { minion_id: 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b', status: 'dispatched', jid: '20251001000000000000', out: 'raw' };
    expect(decodeRecord(original, 'old-1')).toStrictEqual({
      protocol: null,
      request_id: 'old-1',
      minion_id: original.minion_id,
      jid: original.jid,
      recorded_state: 'dispatched',
      state: 'legacy',
      reconciliation: null,
      legacy_fields: original,
    });
  });

  it('says so when a legacy record names no target or no readable state', () => {
    const legacy = decodeRecord({ target: 'web-01', state: 'rm -rf / && echo done' }, 'old-2');
    expect(legacy).toMatchObject({ minion_id: null, recorded_state: null, state: 'legacy' });
  });

  it('reads a reconciled legacy record and writes the reconciliation beside the original fields', () => {
    const reconciliation = { reason: 'checked', actor: 'ops', at: '2026-11-29T10:00:00.000Z' };
    const legacy = decodeRecord({ status: 'sent', [LEGACY_RECONCILIATION_KEY]: reconciliation }, 'old-3');
    expect(legacy).toMatchObject({ state: 'reconciled', reconciliation, recorded_state: 'sent' });
    expect(encodeRecord(legacy)).toStrictEqual({ status: 'sent', [LEGACY_RECONCILIATION_KEY]: reconciliation });
  });
});

describe('encodeRecord', () => {
  const record = decodeRecord(written.records[0]?.stored, written.records[0]?.stored['request_id'] as string) as ProtocolRequestRecord;

  it('writes exactly the sixteen keys of the schema, in its order', () => {
    expect(Object.keys(encodeRecord(record))).toStrictEqual(Object.keys(RequestRecordSchema.shape));
  });

  it.each([
    ['an unknown record without its cause', { ...record, state: 'unknown' }],
    ['a stray property', { ...record, comment: 'raw output' }],
  ])('refuses to write %s (it would not read back)', (_label, broken) => {
    const error = refusalOf(() => encodeRecord(broken as ProtocolRequestRecord));
    expect(error).toMatchObject({ code: 'internal', requestId: record.request_id });
    expect(error.message).not.toContain('raw output');
  });
});
