import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifyFleet } from '../src/verify-fleet.js';
import { GOOD_CAPABILITIES, OLD_CAPABILITIES, STANDIN_MODULE_SHA256, type CallReply } from './support/salt-api-standin.js';
import { MINION, OTHER_MINION, makeWorld, refusal, type World } from './support/harness.js';

const THIRD = 'client-2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b';
const NOT_A_CLIENT = 'client-web-01';

let world: World;
beforeEach(async () => {
  world = await makeWorld();
});
afterEach(async () => {
  await world.close();
});

function fleet(replies: Record<string, CallReply>): void {
  world.standIn.acceptedKeys = Object.keys(replies);
  world.standIn.capabilities = (id) => replies[id] ?? { noReturn: true };
}

const verify = (minionIds?: string[], expectedSha256 = STANDIN_MODULE_SHA256) =>
  verifyFleet({ salt: world.salt, callTimeoutMs: 2_000 }, { expectedSha256, ...(minionIds === undefined ? {} : { minionIds }) });

describe('verifyFleet', () => {
  it('asks every accepted client minion in one glob call and reports one row each, in id order', async () => {
    fleet({
      [OTHER_MINION]: { retcode: 0, ret: GOOD_CAPABILITIES },
      [MINION]: { retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: false, reasons: ['multiprocessing', 'store_unsafe'] } },
      [THIRD]: { noReturn: true },
    });
    const result = await verify();
    expect(world.standIn.calls).toEqual([{ client: 'local', fun: 'oduflow_job.capabilities', tgt: 'client-*', tgtType: 'glob', args: [] }]);
    expect(result).toStrictEqual({
      outcome: 'verified',
      ignored: 0,
      rows: [
        {
          minion_id: MINION,
          status: 'not_ready',
          module_version: '1.1.0',
          salt_version: '3006.27',
          module_sha256: STANDIN_MODULE_SHA256,
          reasons: ['multiprocessing', 'store_unsafe'],
        },
        { minion_id: THIRD, status: 'no_answer', module_version: null, salt_version: null, module_sha256: null, reasons: [] },
        { minion_id: OTHER_MINION, status: 'ready', module_version: '1.1.0', salt_version: '3006.27', module_sha256: STANDIN_MODULE_SHA256, reasons: [] },
      ],
    });
  });

  it.each<[string, CallReply, Record<string, unknown>]>([
    ['a minion without the module', { retcode: 1, ret: "'oduflow_job.capabilities' is not available." }, { status: 'module_missing' }],
    ['module 1.0.0', { retcode: 0, ret: OLD_CAPABILITIES }, { status: 'older_module', module_version: '1.0.0' }],
    ['a protocol 0 module', { retcode: 0, ret: { protocol: 0, module_version: '0.9.0', salt_version: '3006.27' } }, { status: 'older_module', module_version: '0.9.0' }],
    ['a malformed 1.1.0 answer', { retcode: 0, ret: { ...GOOD_CAPABILITIES, ready: 1 } }, { status: 'invalid_capabilities', module_version: '1.1.0' }],
    ['an answer with nothing usable', { retcode: 0, ret: { module_version: '\u001b[2Jhunter2' } }, { status: 'invalid_capabilities', module_version: null }],
    ['a tampered module', { retcode: 0, ret: { ...GOOD_CAPABILITIES, module_sha256: 'f'.repeat(64) } }, { status: 'digest_differs', module_sha256: 'f'.repeat(64) }],
    [
      'a tampered module that is also not ready',
      { retcode: 0, ret: { ...GOOD_CAPABILITIES, module_sha256: 'f'.repeat(64), ready: false, reasons: ['cache_jobs'] } },
      { status: 'digest_differs', reasons: ['cache_jobs'] },
    ],
    ['another Salt that calls itself ready', { retcode: 0, ret: { ...GOOD_CAPABILITIES, salt_version: '3007.1' } }, { status: 'not_ready', reasons: ['salt_version'], salt_version: '3007.1' }],
    [
      'a Salt version with a control character (never shown)',
      { retcode: 0, ret: { ...GOOD_CAPABILITIES, salt_version: '3006.27\u001b[2Jhunter2' } },
      { status: 'not_ready', reasons: ['salt_version'], salt_version: null },
    ],
  ])('reports %s', async (_label, reply, expected) => {
    fleet({ [MINION]: reply });
    const result = await verify();
    expect(result).toMatchObject({ outcome: 'verified', rows: [{ minion_id: MINION, ...expected }] });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it("reads salt-api's entry per minion: false is no answer, anything but {ret, retcode} is not an answer", async () => {
    fleet({ [MINION]: { body: JSON.stringify({ return: [{ [MINION]: 'hunter2', [OTHER_MINION]: false }] }) } });
    const result = await verify();
    expect(result).toMatchObject({
      outcome: 'verified',
      rows: [
        { minion_id: MINION, status: 'invalid_capabilities' },
        { minion_id: OTHER_MINION, status: 'no_answer' },
      ],
    });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('ignores accepted keys that are not canonical client ids, and counts them', async () => {
    fleet({ [MINION]: { retcode: 0, ret: GOOD_CAPABILITIES }, [NOT_A_CLIENT]: { retcode: 0, ret: GOOD_CAPABILITIES } });
    expect(await verify()).toMatchObject({ outcome: 'verified', ignored: 1, rows: [{ minion_id: MINION, status: 'ready' }] });
  });

  it('asks only the named minions, and reports a named minion without an accepted key', async () => {
    fleet({ [MINION]: { retcode: 0, ret: GOOD_CAPABILITIES }, [OTHER_MINION]: { retcode: 0, ret: GOOD_CAPABILITIES } });
    const result = await verify([THIRD, MINION, MINION]);
    expect(world.standIn.calls).toEqual([{ client: 'local', fun: 'oduflow_job.capabilities', tgt: [MINION, THIRD], tgtType: 'list', args: [] }]);
    expect(result).toMatchObject({ outcome: 'verified', rows: [{ minion_id: MINION, status: 'ready' }, { minion_id: THIRD, status: 'no_target' }] });
  });

  it('reports an empty fleet as verified with no rows', async () => {
    fleet({});
    expect(await verify()).toStrictEqual({ outcome: 'verified', ignored: 0, rows: [] });
  });

  it.each<[string, CallReply, string]>([
    ['a 500', { httpStatus: 500 }, 'server_error'],
    ['a body that is not JSON', { body: '<html>' }, 'malformed_response'],
  ])('reports the whole call unreachable on %s', async (_label, reply, failure) => {
    fleet({ [MINION]: reply });
    expect(await verify()).toStrictEqual({ outcome: 'unreachable', failure });
  });

  it('refuses a bad minion id or digest before asking anything', async () => {
    expect(await refusal(verify(['client-NOPE']))).toMatchObject({ code: 'invalid_input', detail: 'invalid_minion_id' });
    expect(await refusal(verify(undefined, 'F'.repeat(64)))).toMatchObject({ code: 'invalid_input', detail: 'invalid_expected_sha256' });
    expect(world.standIn.calls).toEqual([]);
  });
});
