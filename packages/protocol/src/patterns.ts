import type { Profile } from './constants.js';

/*
 * Shared text patterns, defined once. Everything else (master-runner, the
 * minion bundle, the service) imports these instead of keeping a copy.
 */

/** 64 lowercase hex digits: a SHA-256 digest as the protocol writes it. */
export const SHA256_HEX_PATTERN = /^[0-9a-f]{64}$/;

/** semver.org's recommended pattern (2.0.0), with explicit ASCII classes. */
export const SEMVER_PATTERN =
  /^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export function isSha256Hex(value: unknown): value is string {
  return typeof value === 'string' && SHA256_HEX_PATTERN.test(value);
}

export function isSemver(value: unknown): value is string {
  return typeof value === 'string' && SEMVER_PATTERN.test(value);
}

/** `""` binds a fixed role; a custom request is bound by the SHA-256 of its high data. */
export function isStateDigestFor(profile: Profile, digest: unknown): digest is string {
  return profile === 'custom' ? isSha256Hex(digest) : digest === '';
}
