import fc from 'fast-check';
import { ANSWER_STATUSES, BINDING_FIELDS, PROFILES, REFUSAL_REASONS, TERMINAL_STATUSES } from '@oduflow/protocol';
import { type FuzzCase, fuzzCase } from './fuzz-case.js';
import { canonicalJid, canonicalMinionId, canonicalUuid, nearMiss } from './gen-identity.js';
import { hexString, sometimes } from './gen-text.js';

/*
 * Receipts and status answers (DESIGN §3): a valid answer of every status,
 * then zero to two perturbations of any field (removed, of another type, a
 * near miss, counts that do not fit the status, an extra key, the refusal
 * `reason` where it must not be), and a binding that names some fields,
 * exactly or with one of them different.
 */

type Answer = Record<string, unknown>;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function countsFor(status: string, total: number, passedBelow: number): { passed: number; total: number } {
  if (status === 'succeeded') return { passed: total, total };
  if (status === 'failed') return { passed: passedBelow % total, total };
  return { passed: 0, total: 0 };
}

function validAnswer(statuses: readonly string[]): fc.Arbitrary<Answer> {
  return fc
    .record({
      minion_id: canonicalMinionId,
      request_id: canonicalUuid,
      jid: canonicalJid,
      profile: fc.constantFrom(...PROFILES),
      digest: hexString(64),
      status: fc.constantFrom(...statuses),
      total: fc.oneof(fc.integer({ min: 1, max: 120 }), fc.constantFrom(MAX_SAFE)),
      below: fc.nat(),
      reason: fc.constantFrom(...REFUSAL_REASONS),
    })
    .map(({ minion_id, request_id, jid, profile, digest, status, total, below, reason }) => ({
      protocol: 1,
      minion_id,
      request_id,
      jid,
      profile,
      state_digest: profile === 'custom' ? digest : '',
      status,
      ...countsFor(status, total, below),
      ...(status === 'refused' ? { reason } : {}),
    }));
}

/** Wrong values per field: other types, near misses and neighbours of the valid ones. */
function wrongValues(nearMinion: string, nearUuid: string, nearJid: string, digest: string): Record<string, readonly unknown[]> {
  return {
    protocol: [0, 2, '1', true, null, -1, [1], 1.5],
    minion_id: [nearMinion, nearUuid, null, 1, ''],
    request_id: [nearUuid, nearMinion, null, 7, ''],
    jid: [nearJid, Number(nearJid.replace(/[^0-9]/g, '') || '0'), null, '', [nearJid]],
    profile: ['Configure', 'custom ', '', 'roles.client_stack', null, 1, ...PROFILES],
    state_digest: ['', digest.toUpperCase(), digest.slice(1), `${digest}0`, `${digest}\n`, 'g'.repeat(64), null, digest, 0],
    status: [...ANSWER_STATUSES, 'Succeeded', 'success', 'refused', '', null, 1],
    passed: [-1, 0, 1, 2, MAX_SAFE, MAX_SAFE + 1, 1.5, true, '1', null, 2 ** 53],
    total: [-1, 0, 1, 2, MAX_SAFE, MAX_SAFE + 1, 1.5, false, '0', null],
    reason: [...REFUSAL_REASONS, 'already_claimed', 'internal_error', 'Execution_busy', '', null, 0],
  };
}

const EXTRA_KEYS = ['reason', 'message', 'error', 'extra', '__proto__', 'Status', 'protocol ', 'constructor'] as const;
const PERTURBATIONS = ['remove', 'replace', 'add', 'swap_counts'] as const;

const perturbation = fc.record({ kind: fc.constantFrom(...PERTURBATIONS), field: fc.nat(), pick: fc.nat() });

function perturb(answer: Answer, p: { kind: string; field: number; pick: number }, wrong: Record<string, readonly unknown[]>): [Answer, string] {
  const copy: Answer = { ...answer };
  const fields = [...Object.keys(wrong)];
  const field = fields[p.field % fields.length] as string;
  switch (p.kind) {
    case 'remove': {
      const { [field]: _removed, ...without } = copy;
      return [without, `without ${field}`];
    }
    case 'replace': {
      const values = wrong[field] as readonly unknown[];
      copy[field] = values[p.pick % values.length];
      return [copy, `${field} replaced`];
    }
    case 'add': {
      const key = EXTRA_KEYS[p.pick % EXTRA_KEYS.length] as string;
      // defineProperty: a plain assignment of "__proto__" would set the prototype instead of a key.
      Object.defineProperty(copy, key, { value: key === 'reason' ? 'execution_busy' : 'x', enumerable: true, writable: true, configurable: true });
      return [copy, `with an extra key ${JSON.stringify(key)}`];
    }
    default:
      [copy['passed'], copy['total']] = [copy['total'], copy['passed']];
      return [copy, 'passed and total swapped'];
  }
}

/** A binding naming some of the answer's fields, exactly, or with one of them different. */
function bindingFor(answer: Answer, fields: readonly boolean[], differ: number | undefined, other: Answer): Record<string, unknown> {
  const binding: Record<string, unknown> = {};
  BINDING_FIELDS.forEach((field, i) => {
    if (fields[i] === true) binding[field] = answer[field];
  });
  if (differ !== undefined) {
    const field = BINDING_FIELDS[differ % BINDING_FIELDS.length] as string;
    const alternatives = [other[field], String(answer[field]).toUpperCase(), null, 1];
    binding[field] = alternatives[differ % alternatives.length];
  }
  return binding;
}

interface AnswerParts {
  readonly answer: Answer;
  readonly other: Answer;
  readonly nearMinion: { readonly value: string };
  readonly nearUuid: { readonly value: string };
  readonly nearJid: { readonly value: string };
  readonly perturbations: ReadonlyArray<{ kind: string; field: number; pick: number }>;
  readonly bound: readonly boolean[];
  readonly differ: number | undefined;
  readonly notObject: unknown;
}

const answerParts = (statuses: readonly string[]): fc.Arbitrary<AnswerParts> =>
  fc.record({
    answer: validAnswer(statuses),
    other: validAnswer(statuses),
    nearMinion: nearMiss(canonicalMinionId),
    nearUuid: nearMiss(canonicalUuid),
    nearJid: nearMiss(canonicalJid),
    perturbations: fc.oneof({ arbitrary: fc.constant<Array<{ kind: string; field: number; pick: number }>>([]), weight: 2 }, { arbitrary: fc.array(perturbation, { minLength: 1, maxLength: 2 }), weight: 5 }),
    bound: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
    differ: sometimes(fc.nat(), 3),
    notObject: sometimes(fc.constantFrom<unknown>(null, [], 'x', 1, true), 30),
  });

function built(parts: AnswerParts): { answer: unknown; binding: Record<string, unknown>; label: string } {
  const wrong = wrongValues(parts.nearMinion.value, parts.nearUuid.value, parts.nearJid.value, (parts.answer['state_digest'] as string) || 'a'.repeat(64));
  let answer = parts.answer;
  const labels: string[] = [`status ${String(answer['status'])}`];
  for (const p of parts.perturbations) {
    const [next, label] = perturb(answer, p, wrong);
    answer = next;
    labels.push(label);
  }
  const binding = bindingFor(parts.answer, parts.bound, parts.differ, parts.other);
  if (parts.differ !== undefined) labels.push('a binding with one field different');
  if (parts.notObject !== undefined) return { answer: parts.notObject, binding, label: 'an answer that is not an object' };
  return { answer, binding, label: labels.join(', ') };
}

const RECEIPT_STATUSES = [...TERMINAL_STATUSES, ...TERMINAL_STATUSES, 'running', 'not_started', 'refused'] as const;

export const receiptCase: fc.Arbitrary<FuzzCase> = fc.tuple(answerParts(RECEIPT_STATUSES), fc.boolean()).map(([parts, withBinding]) => {
  const { answer, binding, label } = built(parts);
  return fuzzCase('receipt', withBinding ? { receipt: answer, binding } : { receipt: answer }, `receipt: ${label}`);
});

export const statusAnswerCase: fc.Arbitrary<FuzzCase> = answerParts(ANSWER_STATUSES).map((parts) => {
  const { answer, binding, label } = built(parts);
  return fuzzCase('status_answer', { answer, binding }, `status answer: ${label}`);
});
