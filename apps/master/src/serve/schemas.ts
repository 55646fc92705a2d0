import {
  HISTORY_HEAD,
  HISTORY_TAIL,
  HistoryEntrySchema,
  InstantSchema,
  PROFILES,
  REQUEST_STATES,
  RequestRecordSchema,
  isMinionId,
  type RequestHistory,
  type RequestRecord,
} from '@oduflow/protocol';
import { z } from 'zod';

/*
 * The API's bodies, queries and answers, once: the routes validate with
 * them and /openapi.json is generated from them. A record is shown as the
 * store holds it (RequestRecordSchema): it never holds state data, raw
 * output or credentials; a custom request shows only its state_digest. A
 * legacy record is shown without its verbatim legacy fields (they may hold
 * raw output).
 */

const MinionId = z.string().refine(isMinionId, { message: 'not a minion id' }).meta({ description: 'client-<canonical uuid>', example: 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b' });

export const CreateRequestBodySchema = z
  .strictObject({
    minion_id: MinionId,
    profile: z.enum(PROFILES),
    state_data: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'custom profile only, required there: the high data (state ids → {module: [function, {arg}…]}). It is canonicalized (RFC 8785), bound to the request by its SHA-256 (state_digest), kept only until publication and never shown again.',
      ),
  })
  .meta({ id: 'CreateRequest' });

const ReconciliationView = z.strictObject({ reason: z.string(), actor: z.string(), at: InstantSchema });

const LegacyRecordSchema = z
  .strictObject({
    protocol: z.null(),
    request_id: z.string(),
    minion_id: z.string().nullable().describe('null: the legacy record names no target, and blocks every target'),
    jid: z.string().nullable(),
    recorded_state: z.string().nullable(),
    state: z.enum(['legacy', 'reconciled']),
    reconciliation: ReconciliationView.nullable(),
  })
  .meta({ id: 'LegacyRequestRecord', description: 'A record from before protocol 1, without its verbatim fields' });

const ProtocolRecordSchema = RequestRecordSchema.meta({
  id: 'RequestRecord',
  description: 'The request record as stored (protocol 1). Never holds state data; a custom request carries only its state_digest.',
});

export const RecordViewSchema = z.union([ProtocolRecordSchema, LegacyRecordSchema]);
export type RecordView = z.infer<typeof RecordViewSchema>;

export function recordView(record: RequestRecord): RecordView {
  if (record.protocol === 1) return record;
  const { legacy_fields: _hidden, ...shown } = record;
  return shown;
}

export const RequestHistoryViewSchema = z
  .strictObject({
    request_id: z.string(),
    kept: z.boolean().describe('false: the record predates request histories (its entries were not kept)'),
    entries: z
      .array(HistoryEntrySchema.meta({ id: 'HistoryEntry', description: 'One committed change of the record: when, from which state to which, by which event and part of the master' }))
      .describe(`oldest first; the first ${HISTORY_HEAD} and the last ${HISTORY_TAIL} entries are kept`),
    dropped: z.number().int().min(0).describe('entries let go between the first and the last ones (seq numbers show the gap)'),
  })
  .meta({ id: 'RequestHistory' });
export type RequestHistoryView = z.infer<typeof RequestHistoryViewSchema>;

export function historyView(requestId: string, history: RequestHistory): RequestHistoryView {
  return { request_id: requestId, kept: history.entries.length > 0, entries: [...history.entries], dropped: history.dropped };
}

export const RequestIdParamsSchema = z.strictObject({ id: z.string().max(255).describe('a request id (a UUID, or a legacy record name)') });
export const TargetParamsSchema = z.strictObject({ minion_id: z.string().max(255) });

const STATE_LIST = new RegExp(`^(${REQUEST_STATES.join('|')})(,(${REQUEST_STATES.join('|')}))*$`);

export const ListQuerySchema = z.strictObject({
  state: z.string().regex(STATE_LIST).optional().describe(`comma-separated states: ${REQUEST_STATES.join(', ')}`),
  minion_id: MinionId.optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z.string().max(512).optional().describe('next_cursor of the previous page'),
});

export const RecordListSchema = z
  .strictObject({
    items: z.array(RecordViewSchema).describe('in request-id order'),
    next_cursor: z.string().nullable().describe('pass as `cursor` for the next page; null on the last page'),
  })
  .meta({ id: 'RequestList' });

export const TargetViewSchema = z
  .strictObject({
    minion_id: z.string(),
    blocked: z.boolean(),
    blockers: z
      .array(z.strictObject({ request_id: z.string().nullable().describe('null: a record the tenant may not see'), state: z.enum(REQUEST_STATES) }))
      .describe('the unresolved requests that refuse another dispatch to this target'),
  })
  .meta({ id: 'Target' });

export const ReconcileBodySchema = z
  .strictObject({ reason: z.string().min(1).max(1000).describe('why, for the record (printable characters)') })
  .meta({ id: 'Reconcile' });

export const HealthSchema = z.strictObject({ status: z.literal('ok') });
export const ReadinessSchema = z.strictObject({
  ready: z.boolean(),
  store: z.enum(['ok', 'failed']),
  salt_api: z.string().describe('ok, or why salt-api did not accept a login'),
  draining: z.boolean(),
});
