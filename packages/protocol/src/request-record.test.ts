import { describe, expect, it } from 'vitest';
import { RECORD_REASON_CODES } from './record-vocabulary.js';
import { POLLABLE_STATES, REQUEST_STATES, RequestRecordSchema, createRequestRecord, isPollable, type ProtocolRequestRecord, type RequestRecord } from './request-record.js';
import { BASE_RECORD, T0 } from '../tests/support.js';


const base = BASE_RECORD;

/** The first path zod names for `value`, or 'ok'. */
function problemOf(value: unknown): string {
  const parsed = RequestRecordSchema.safeParse(value);
  return parsed.success ? 'ok' : (parsed.error.issues[0]?.path.join('.') ?? '?');
}

describe('createRequestRecord', () => {
  it('starts prepared with the fixed role, no attempts and no result', () => {
    expect(base).toMatchObject({ protocol: 1, state: 'prepared', role: 'roles.client_stack', publish_attempts: 0, passed: 0, total: 0 });
    expect(base.created_at).toBe(T0);
    expect(problemOf(base)).toBe('ok');
  });

  it('names the custom role for custom high data', () => {
    const custom = createRequestRecord({ ...base, profile: 'custom', state_digest: 'a'.repeat(64), at: T0 });
    expect(custom.role).toBe('custom');
    expect(problemOf(custom)).toBe('ok');
  });
});

describe('RequestRecordSchema', () => {
  it('accepts a settled record of every kind of reason', () => {
    const records: ProtocolRequestRecord[] = [
      { ...base, state: 'rejected', reason: { code: 'not_ready', readiness: ['multiprocessing', 'cache_jobs'] } },
      {
        ...base,
        state: 'rejected',
        publish_attempts: 1,
        reason: { code: 'refused', refusal: 'execution_busy' },
        last_observation: { status: 'refused', reason: 'execution_busy', at: T0 },
      },
      { ...base, state: 'unknown', publish_attempts: 1, reason: { code: 'unknown', cause: 'status_unknown' } },
      { ...base, state: 'published', publish_attempts: 1, reason: { code: 'minion_error', error: 'a_code_from_the_future' }, last_observation: { error: 'a_code_from_the_future', at: T0 } },
      { ...base, state: 'published', publish_attempts: 1, reason: { code: 'poll_failed', failure: 'no_return' }, last_observation: { failure: 'no_return', at: T0 } },
      { ...base, state: 'succeeded', publish_attempts: 1, passed: 3, total: 3, last_observation: { status: 'succeeded', at: T0 } },
      { ...base, state: 'reconciled', reconciliation: { reason: 'checked', actor: 'ops', at: T0 } },
    ];
    for (const record of records) expect(problemOf(record)).toBe('ok');
  });

  it.each([
    ['an extra key', { ...base, comment: 'raw output' }, ''],
    ['a missing key', (({ reason: _r, ...rest }) => rest)(base), 'reason'],
    ['a protocol other than 1', { ...base, protocol: 2 }, 'protocol'],
    ['the legacy state', { ...base, state: 'legacy' }, 'state'],
    ['a role that does not fit the profile', { ...base, role: 'roles.client_production' }, 'role'],
    ['a digest on a fixed role', { ...base, state_digest: 'a'.repeat(64) }, 'state_digest'],
    ['counts on a prepared request', { ...base, passed: 1, total: 1 }, 'passed'],
    ['succeeded without states', { ...base, state: 'succeeded' }, 'passed'],
    ['a reconciliation on a request that is not reconciled', { ...base, reconciliation: { reason: 'x', actor: 'ops', at: T0 } }, 'reconciliation'],
    ['a rejected request without a reason', { ...base, state: 'rejected' }, 'reason'],
    ['an unknown request without its cause', { ...base, state: 'unknown' }, 'reason'],
    ['a reason as free text', { ...base, reason: 'status_timeout' }, 'reason'],
    ['a reason outside the closed set', { ...base, reason: { code: 'because' } }, 'reason.code'],
    ['a not_ready reason without readiness reasons', { ...base, state: 'rejected', reason: { code: 'not_ready', readiness: [] } }, 'reason.readiness'],
    ['an error code of the wrong shape', { ...base, reason: { code: 'minion_error', error: 'Not A Code' } }, 'reason.error'],
    ['an observation with counts', { ...base, last_observation: { status: 'succeeded', passed: 1, at: T0 } }, 'last_observation'],
    ['a timestamp that is not an instant', { ...base, updated_at: 'yesterday' }, 'updated_at'],
    ['a JID as a number', { ...base, jid: 20261129100000000000 }, 'jid'],
  ])('refuses %s', (_name, value, path) => {
    expect(problemOf(value)).toBe(path);
  });

  it('lists every reason code once', () => {
    expect(new Set(RECORD_REASON_CODES).size).toBe(RECORD_REASON_CODES.length);
    expect(RECORD_REASON_CODES).toContain('refused');
    expect(RECORD_REASON_CODES).toContain('not_ready');
  });
});

// Mutation testing found the count rules and isPollable untested in protocol itself.
describe('the counts a record may carry', () => {
  const settled = { ...base, publish_attempts: 1, last_observation: { status: 'succeeded', at: T0 } };
  it.each([
    ['succeeded with every state passed', { ...settled, state: 'succeeded', passed: 3, total: 3 }, 'ok'],
    ['failed with one state failed', { ...settled, state: 'failed', passed: 2, total: 3, last_observation: { status: 'failed', at: T0 } }, 'ok'],
    ['succeeded with a failed state', { ...settled, state: 'succeeded', passed: 2, total: 3 }, 'passed'],
    ['succeeded with nothing counted', { ...settled, state: 'succeeded', passed: 0, total: 0 }, 'passed'],
    ['failed with every state passed', { ...settled, state: 'failed', passed: 3, total: 3 }, 'passed'],
    ['failed with nothing counted', { ...settled, state: 'failed', passed: 0, total: 0 }, 'passed'],
    ['unknown with a count', { ...settled, state: 'unknown', passed: 0, total: 1, reason: { code: 'unknown', cause: 'status_unknown' } }, 'passed'],
    ['prepared with passed states', { ...base, passed: 1, total: 1 }, 'passed'],
    ['prepared with a total only', { ...base, passed: 0, total: 2 }, 'passed'],
  ])('%s: %s', (_name, record, problem) => {
    expect(problemOf(record)).toBe(problem);
  });
});

describe('isPollable', () => {
  it('is true exactly for the states that wait for a status answer', () => {
    const record = (state: string): RequestRecord => ({ ...base, state }) as RequestRecord;
    expect(REQUEST_STATES.filter((state) => isPollable(record(state)))).toEqual([...POLLABLE_STATES]);
    expect(isPollable(record('running'))).toBe(true);
    expect(isPollable(record('succeeded'))).toBe(false);
  });
});

