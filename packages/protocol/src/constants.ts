/** The protocol version every receipt, status answer and capability carries. */
export const PROTOCOL_VERSION = 1 as const;

/** The Salt release the minion module's runtime shims are verified against. */
export const PINNED_SALT_VERSION = '3006.27' as const;

export const PROFILES = ['configure', 'production', 'volume_resize', 'credentials', 'custom'] as const;
export type Profile = (typeof PROFILES)[number];
export type FixedProfile = Exclude<Profile, 'custom'>;

/** Fixed profiles map to one Salt role each; `custom` runs caller high data bound by its digest. */
export const PROFILE_ROLES: Readonly<Record<FixedProfile, string>> = Object.freeze({
  configure: 'roles.client_stack',
  production: 'roles.client_production',
  volume_resize: 'roles.client_storage_resize',
  credentials: 'roles.client_credentials',
});

/**
 * What `oduflow_job.capabilities` must report before a new request is
 * published: this protocol, on exactly the pinned Salt.
 */
export const CAPABILITY = Object.freeze({
  protocol: PROTOCOL_VERSION,
  salt_version: PINNED_SALT_VERSION,
});

export const MAX_HIGH_DATA_BYTES = 64 * 1024;
export const MAX_HIGH_DATA_DEPTH = 32;
/**
 * Canonical JSON nests at most this deep (the top-level container is depth 1):
 * `parseCanonicalJson` scans the text before parsing, `canonicalJson` refuses
 * a deeper value, so no recursion limit in either language decides anything.
 */
export const MAX_JSON_DEPTH = 100;
