import {
  ProtocolError,
  REQUEST_EVENTS,
  REQUEST_STATES,
  RequestRecordSchema,
  applyEvent,
  transitionCell,
  type RequestEvent,
  type RequestRecord,
  type RequestState,
} from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { loadFixtureFile } from './fixtures.js';

/*
 * Runs fixtures/transitions.json through applyEvent and holds the corpus to
 * the transition table: every (state, event) cell has a case, and a case in
 * an `illegal` or `keep` cell shows exactly that. Transitions are the
 * master's alone, so there is no Python counterpart of this runner.
 */

const file = loadFixtureFile('transitions');

interface TransitionCase {
  readonly id: string;
  readonly description: string;
  readonly record: RequestRecord;
  readonly event: RequestEvent;
  readonly expect?: RequestRecord;
  readonly error?: string;
}

/** The loader checked the case shape; record and event are what applyEvent takes. */
const cases: TransitionCase[] = file.cases.map((c) => ({
  id: c.id,
  description: c.description,
  record: c.input.record as unknown as RequestRecord,
  event: c.input.event as unknown as RequestEvent,
  ...(c.error === undefined ? { expect: c.expect as RequestRecord } : { error: c.error }),
}));

function outcomeOf(c: TransitionCase): { value: RequestRecord } | { code: string } {
  try {
    return { value: applyEvent(c.record, c.event) };
  } catch (error) {
    if (ProtocolError.isInstance(error)) return { code: error.code };
    throw error;
  }
}

function stateOf(record: RequestRecord): RequestState {
  return record.protocol === null && record.state === 'legacy' ? 'legacy' : record.state;
}

describe('transitions fixture file', () => {
  it('holds a case for every state and event of the transition table', () => {
    const covered = new Set(cases.map((c) => `${stateOf(c.record)}/${c.event.type}`));
    const missing = REQUEST_STATES.flatMap((state) => REQUEST_EVENTS.map((type) => `${state}/${type}`)).filter((cell) => !covered.has(cell));
    expect(missing).toStrictEqual([]);
  });

  it('uses only records the record schema accepts, before and after', () => {
    for (const c of cases) {
      for (const record of [c.record, c.expect]) {
        if (record?.protocol !== 1) continue;
        const parsed = RequestRecordSchema.safeParse(record);
        expect(parsed.success, `${c.id}: ${parsed.success ? '' : JSON.stringify(parsed.error.issues[0]?.path)}`).toBe(true);
      }
    }
  });

  it('shows exactly what the table decides in its illegal and keep cells', () => {
    for (const c of cases) {
      const cell = c.record.protocol === null && c.record.state !== 'legacy' ? 'illegal' : transitionCell(stateOf(c.record), c.event.type);
      if (cell === 'illegal') expect(c.error, c.id).toBe('illegal_transition');
      if (cell === 'keep') expect(c.expect, c.id).toStrictEqual(c.record);
    }
  });
});

describe('applyEvent against the transitions fixtures', () => {
  for (const c of cases) {
    it(`${c.id}: ${c.description}`, () => {
      const outcome = outcomeOf(c);
      if (c.error !== undefined) expect(outcome).toStrictEqual({ code: c.error });
      else expect(outcome).toStrictEqual({ value: c.expect });
    });
  }
});
