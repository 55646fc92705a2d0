import {
  ANSWER_STATUSES,
  PROFILES,
  REQUEST_STATES,
  isJid,
  isMinionId,
  isRequestId,
  roleForProfile,
  type LegacyRequestRecord,
  type Observation,
  type ProtocolRequestRecord,
  type Reconciliation,
  type RequestRecord,
} from '@oduflow/protocol';
import { MasterRunnerError } from './errors.js';

/*
 * How records look at rest. A protocol-1 record is stored as itself and
 * checked field by field on every read, so a hand-edited or truncated record
 * stops the runner (store_corrupt) instead of being misread. Anything without
 * `protocol: 1` predates this protocol: it is loaded as `legacy`, its fields
 * kept verbatim, and an operator reconciliation is stored beside them under
 * one added key, so the original interpretation is never rewritten.
 */

/** The one key this runner adds to a legacy record: the operator's reconciliation. */
export const LEGACY_RECONCILIATION_KEY = 'oduflow_reconciliation';

/** Legacy records may name their target under one of these keys. */
const LEGACY_TARGET_KEYS = ['minion_id', 'target', 'minion', 'tgt'] as const;

const SHA256_HEX = /^[0-9a-f]{64}$/;
const PROTOCOL_RECORD_KEYS = [
  'protocol',
  'request_id',
  'minion_id',
  'profile',
  'role',
  'state_digest',
  'jid',
  'state',
  'publish_attempts',
  'last_observation',
  'passed',
  'total',
  'reason',
  'reconciliation',
  'created_at',
  'updated_at',
] as const;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isReconciliation(value: unknown): value is Reconciliation {
  return (
    isPlainObject(value) &&
    Object.keys(value).length === 3 &&
    typeof value['reason'] === 'string' &&
    typeof value['actor'] === 'string' &&
    typeof value['at'] === 'string'
  );
}

function isObservation(value: unknown): value is Observation {
  return (
    isPlainObject(value) &&
    Object.keys(value).length === 2 &&
    (ANSWER_STATUSES as readonly unknown[]).includes(value['status']) &&
    typeof value['at'] === 'string'
  );
}

function corrupt(name: string, what: string): MasterRunnerError {
  return new MasterRunnerError('store_corrupt', `stored record ${name} ${what}`);
}

/** The first problem with a stored protocol-1 record, or undefined when it is sound. */
function protocolRecordProblem(raw: Record<string, unknown>, requestId: string): string | undefined {
  const keys = Object.keys(raw);
  if (keys.length !== PROTOCOL_RECORD_KEYS.length || !PROTOCOL_RECORD_KEYS.every((k) => Object.hasOwn(raw, k))) {
    return 'does not have exactly the fields of a protocol 1 record';
  }
  if (raw['request_id'] !== requestId || !isRequestId(raw['request_id'])) return 'is stored under another request id';
  if (!isMinionId(raw['minion_id'])) return 'has an invalid minion id';
  if (!isJid(raw['jid'])) return 'has an invalid JID';
  const profile = raw['profile'];
  if (!(PROFILES as readonly unknown[]).includes(profile)) return 'has an unknown profile';
  if (raw['role'] !== roleForProfile(profile as (typeof PROFILES)[number])) return 'has a role that does not fit its profile';
  const digest = raw['state_digest'];
  const digestFits = profile === 'custom' ? typeof digest === 'string' && SHA256_HEX.test(digest) : digest === '';
  if (!digestFits) return 'has a state digest that does not fit its profile';
  if (raw['state'] === 'legacy' || !(REQUEST_STATES as readonly unknown[]).includes(raw['state'])) return 'has an unknown state';
  if (!isCount(raw['publish_attempts']) || !isCount(raw['passed']) || !isCount(raw['total'])) return 'has invalid counts';
  if (raw['last_observation'] !== null && !isObservation(raw['last_observation'])) return 'has an invalid observation';
  if (raw['reason'] !== null && typeof raw['reason'] !== 'string') return 'has an invalid reason';
  if (raw['reconciliation'] !== null && !isReconciliation(raw['reconciliation'])) return 'has an invalid reconciliation';
  if (typeof raw['created_at'] !== 'string' || typeof raw['updated_at'] !== 'string') return 'has invalid timestamps';
  return undefined;
}

function legacyFrom(raw: Record<string, unknown>, requestId: string): LegacyRequestRecord {
  const { [LEGACY_RECONCILIATION_KEY]: reconciliation, ...original } = raw;
  const target = LEGACY_TARGET_KEYS.map((k) => original[k]).find(isMinionId);
  const jid = original['jid'];
  const reconciled = isReconciliation(reconciliation) ? reconciliation : null;
  return {
    protocol: null,
    request_id: requestId,
    minion_id: target ?? null,
    jid: isJid(jid) ? jid : null,
    state: reconciled === null ? 'legacy' : 'reconciled',
    reconciliation: reconciled,
    legacy_fields: original,
  };
}

/** Interprets what is stored under `requestId`; throws store_corrupt for a damaged protocol-1 record. */
export function decodeRecord(raw: unknown, requestId: string): RequestRecord {
  if (!isPlainObject(raw)) throw corrupt(requestId, 'is not a JSON object');
  if (raw['protocol'] !== 1) return legacyFrom(raw, requestId);
  const problem = protocolRecordProblem(raw, requestId);
  if (problem !== undefined) throw corrupt(requestId, problem);
  return raw as unknown as ProtocolRequestRecord;
}

/** The stored form of a record. */
export function encodeRecord(record: RequestRecord): Record<string, unknown> {
  if (record.protocol === 1) {
    // Only the known fields, in a fixed order: a stray property never reaches disk.
    return Object.fromEntries(PROTOCOL_RECORD_KEYS.map((k) => [k, record[k]]));
  }
  return record.reconciliation === null
    ? { ...record.legacy_fields }
    : { ...record.legacy_fields, [LEGACY_RECONCILIATION_KEY]: record.reconciliation };
}
