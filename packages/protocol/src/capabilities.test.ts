import { describe, expect, it } from 'vitest';
import { CapabilitiesSchema, READINESS_REASONS, capabilityVerdict, parseCapabilities } from './capabilities.js';
import { PINNED_SALT_VERSION } from './constants.js';
import { ProtocolError } from './errors.js';
import { codeOf } from '../tests/support.js';

const READY = {
  protocol: 1,
  module_version: '1.1.0',
  salt_version: PINNED_SALT_VERSION,
  module_sha256: 'ab'.repeat(32),
  ready: true,
  reasons: [],
} as const;

describe('parseCapabilities', () => {
  it('returns a ready answer with its six keys', () => {
    expect(parseCapabilities(READY)).toStrictEqual(READY);
    expect(CapabilitiesSchema.safeParse(READY).success).toBe(true);
  });

  it('returns a well-formed not-ready answer, reasons in protocol order', () => {
    const notReady = { ...READY, ready: false, reasons: ['multiprocessing', 'cache_jobs', 'store_unsafe'] };
    expect(parseCapabilities(notReady)).toStrictEqual(notReady);
    expect(parseCapabilities({ ...READY, ready: false, reasons: [...READINESS_REASONS] }).reasons).toStrictEqual(READINESS_REASONS);
  });

  it('checks the shape only: another Salt, or any text as the Salt version, still parses', () => {
    expect(parseCapabilities({ ...READY, salt_version: '3007.1' }).salt_version).toBe('3007.1');
    expect(parseCapabilities({ ...READY, salt_version: '' }).salt_version).toBe('');
  });

  it.each([
    ["an older module's three-key answer", { protocol: 1, module_version: '1.0.0', salt_version: PINNED_SALT_VERSION }],
    ['ready with reasons', { ...READY, reasons: ['cache_jobs'] }],
    ['not ready without reasons', { ...READY, ready: false }],
    ['reasons out of order', { ...READY, ready: false, reasons: ['cache_jobs', 'multiprocessing'] }],
    ['a duplicate reason', { ...READY, ready: false, reasons: ['cache_jobs', 'cache_jobs'] }],
    ['an unknown reason', { ...READY, ready: false, reasons: ['cosmic_rays'] }],
    ['ready as a number', { ...READY, ready: 1 }],
    ['protocol true', { ...READY, protocol: true }],
    ['protocol 2', { ...READY, protocol: 2 }],
    ['an uppercase digest', { ...READY, module_sha256: 'AB'.repeat(32) }],
    ['a short digest', { ...READY, module_sha256: 'ab'.repeat(31) }],
    ['a module version that is not semver', { ...READY, module_version: 'v1.1' }],
    ['a Salt version that is not text', { ...READY, salt_version: 3006.27 }],
    ['an extra key', { ...READY, features: [] }],
    ['reasons as a string', { ...READY, ready: false, reasons: 'cache_jobs' }],
    ['a Salt string answer', "'oduflow_job.capabilities' is not available."],
  ])('refuses %s as invalid_capabilities', (_name, value) => {
    expect(codeOf(() => parseCapabilities(value))).toBe('invalid_capabilities');
  });

  it('never echoes a value from the answer in its message', () => {
    try {
      parseCapabilities({ ...READY, module_version: 'hunter2-secret' });
      expect.unreachable();
    } catch (error) {
      expect(ProtocolError.isInstance(error) && error.message).toBe('capabilities answer field "module_version" is missing or invalid');
    }
  });
});

describe('capabilityVerdict', () => {
  it('is ready for a ready answer on the pinned Salt', () => {
    expect(capabilityVerdict(parseCapabilities(READY))).toStrictEqual({ ready: true });
  });

  it("keeps the minion's reasons", () => {
    expect(capabilityVerdict(parseCapabilities({ ...READY, ready: false, reasons: ['multiprocessing', 'sudo_user'] }))).toStrictEqual({
      ready: false,
      reasons: ['multiprocessing', 'sudo_user'],
    });
  });

  it('is never ready on a Salt other than the pinned one, whatever the minion says', () => {
    expect(capabilityVerdict(parseCapabilities({ ...READY, salt_version: '3006.9' }))).toStrictEqual({ ready: false, reasons: ['salt_version'] });
    const both = capabilityVerdict(parseCapabilities({ ...READY, salt_version: '3007.1', ready: false, reasons: ['cache_jobs'] }));
    expect(both).toStrictEqual({ ready: false, reasons: ['salt_version', 'cache_jobs'] });
  });

  it('is not ready on a Salt version that is no version at all', () => {
    expect(capabilityVerdict(parseCapabilities({ ...READY, salt_version: '3006.27\n' }))).toStrictEqual({ ready: false, reasons: ['salt_version'] });
  });

  it('does not repeat salt_version when the minion reported it already', () => {
    const reported = parseCapabilities({ ...READY, salt_version: '3007.1', ready: false, reasons: ['salt_version'] });
    expect(capabilityVerdict(reported)).toStrictEqual({ ready: false, reasons: ['salt_version'] });
  });
});
