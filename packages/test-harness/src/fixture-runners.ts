import {
  type Binding,
  canonicalJson,
  parseCanonicalJson,
  parseCapabilities,
  parseJid,
  parseMinionId,
  parseReceipt,
  parseRequestId,
  parseStatusAnswer,
  reduceStateResult,
  stateDigest,
} from '@oduflow/protocol';
import type { FixtureCategory, FixtureInput } from './fixtures.js';

/** The categories both languages implement (`transitions` is the master's alone). */
export type ProtocolCategory = Exclude<FixtureCategory, 'transitions'>;

export const PROTOCOL_CATEGORIES = [
  'identity',
  'canonical_json',
  'high_data',
  'reduction',
  'receipt',
  'status_answer',
  'capabilities',
] as const satisfies readonly ProtocolCategory[];

/**
 * How each category's input is fed to @oduflow/protocol (the table in
 * fixtures/README.md). One table for the corpus runner and the differential
 * fuzzer, so both ask the protocol the same question.
 */
const RUNNERS: { [C in ProtocolCategory]: (input: FixtureInput<C>) => unknown } = {
  identity: ({ kind, value }) => ({ request_id: parseRequestId, minion_id: parseMinionId, jid: parseJid })[kind](value),
  canonical_json: (input) => (input.op === 'serialize' ? canonicalJson(input.value) : parseCanonicalJson(input.text)),
  high_data: ({ state_data_json }) => stateDigest(state_data_json),
  reduction: ({ state_return }) => reduceStateResult(state_return),
  // Binding values are deliberately untyped in fixtures (a JID bound as a number must conflict).
  receipt: ({ receipt, binding }) => parseReceipt(receipt, binding as Binding | undefined),
  status_answer: ({ answer, binding }) => parseStatusAnswer(answer, binding as Binding),
  capabilities: ({ answer }) => parseCapabilities(answer),
};

/** Runs one case input through @oduflow/protocol; the input must already satisfy its category's schema. */
export function runProtocolCase(category: ProtocolCategory, input: unknown): unknown {
  return (RUNNERS[category] as (input: unknown) => unknown)(input);
}
