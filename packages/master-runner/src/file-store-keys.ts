import { isRequestId, isSha256Hex } from '@oduflow/protocol';
import type { PrivateDir } from '@oduflow/receipt-store';
import { MasterRunnerError } from './errors.js';
import { isPlainObject } from './plain-object.js';
import type { AdmissionKey } from './record-store.js';
import { isNotFound } from './store-format.js';

/*
 * keys/<key_hash>.json of the file store: one Idempotency-Key, hashed and
 * scoped (the raw key is never stored). `claimed` while its admission runs
 * (`lease_until` bounds how long), `bound` once the create unit stored the
 * record (W5; `bound_at` is the record's created_at). A `claimed` entry whose
 * request id has a record is bound too: the create unit was cut between W4
 * and W5 (S8), and the record is what counts.
 */

export interface KeyEntry {
  readonly key_hash: string;
  readonly fingerprint: string;
  readonly request_id: string;
  readonly tenant: string;
  readonly actor: string;
  readonly state: 'claimed' | 'bound';
  /** ISO instant the claim lapses (kept once bound, for operators). */
  readonly lease_until: string;
  /** ISO instant it was bound (its record's created_at), or null while claimed. */
  readonly bound_at: string | null;
}

/** The longest tenant or actor name kept with a key (they come from the service's tokens file). */
const MAX_NAME_LENGTH = 255;

function isName(value: unknown): value is string {
  // No control characters: they end up in an operator's terminal.
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_NAME_LENGTH && !/[\u0000-\u001f\u007f]/.test(value);
}

function isInstant(value: unknown): value is string {
  return typeof value === 'string' && Number.isFinite(Date.parse(value));
}

/** Refuses a key that this store could not name a file by, before any lock or file is touched. */
export function checkAdmissionKey(key: AdmissionKey): void {
  const fields = key as unknown as Record<string, unknown>;
  if (!isSha256Hex(fields['keyHash']) || !isSha256Hex(fields['fingerprint'])) {
    throw new MasterRunnerError('invalid_input', 'an admission key needs a SHA-256 key hash and fingerprint (lowercase hex)', { detail: 'invalid_admission_key' });
  }
  if (!isName(fields['tenant']) || !isName(fields['actor'])) {
    throw new MasterRunnerError('invalid_input', `an admission key needs a tenant and an actor of 1 to ${MAX_NAME_LENGTH} printable characters`, {
      detail: 'invalid_admission_key',
    });
  }
}

function keyFileName(keyHash: string): string {
  return `${keyHash}.json`;
}

export function keyLockName(keyHash: string): string {
  return `key-${keyHash}.lock`;
}

/** The key hash a keys/ entry is named by, or undefined for anything else (a stale temporary file). */
export function keyHashOfFileName(name: string): string | undefined {
  const hash = name.endsWith('.json') ? name.slice(0, -'.json'.length) : '';
  return isSha256Hex(hash) ? hash : undefined;
}

function corrupt(): MasterRunnerError {
  // The file's content is never echoed: it names tenants and actors.
  return new MasterRunnerError('store_corrupt', 'an idempotency key entry of the store is not what this runner writes');
}

function decodeKeyEntry(raw: unknown, keyHash: string): KeyEntry {
  if (!isPlainObject(raw)) throw corrupt();
  const state = raw['state'];
  const boundAt = raw['bound_at'];
  const ok =
    raw['key_hash'] === keyHash &&
    isSha256Hex(raw['fingerprint']) &&
    typeof raw['request_id'] === 'string' &&
    isRequestId(raw['request_id']) &&
    isName(raw['tenant']) &&
    isName(raw['actor']) &&
    (state === 'claimed' || state === 'bound') &&
    isInstant(raw['lease_until']) &&
    (state === 'bound' ? isInstant(boundAt) : boundAt === null);
  if (!ok) throw corrupt();
  return raw as unknown as KeyEntry;
}

export function readKeyEntry(dir: PrivateDir, keyHash: string): KeyEntry | undefined {
  const raw = dir.readJsonIfExists(keyFileName(keyHash));
  return raw === undefined ? undefined : decodeKeyEntry(raw, keyHash);
}

export function writeKeyEntry(dir: PrivateDir, entry: KeyEntry): void {
  dir.writeJsonAtomic(keyFileName(entry.key_hash), entry, { replace: true });
}

export function removeKeyEntry(dir: PrivateDir, keyHash: string): void {
  try {
    dir.remove(keyFileName(keyHash));
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}
