import { ProtocolError, applyEvent, type RequestEvent, type RequestRecord } from '@oduflow/protocol';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * Runs fixtures/transitions.json through applyEvent. Transitions are the
 * master's alone, so there is no Python counterpart of this runner.
 */

interface TransitionCase {
  readonly id: string;
  readonly description: string;
  readonly input: { readonly record: RequestRecord; readonly event: RequestEvent };
  readonly expect?: RequestRecord;
  readonly error?: string;
}

const file = JSON.parse(readFileSync(fileURLToPath(new URL('../fixtures/transitions.json', import.meta.url)), 'utf8')) as {
  category: string;
  description: string;
  cases: TransitionCase[];
};

describe('transitions fixture file', () => {
  it('declares its category and holds at least thirty cases', () => {
    expect(file.category).toBe('transitions');
    expect(file.cases.length).toBeGreaterThanOrEqual(30);
  });

  it('names every case uniquely under transitions/ with exactly one of expect or error', () => {
    const ids = new Set<string>();
    for (const c of file.cases) {
      expect(c.id).toMatch(/^transitions\/[a-z0-9]+(?:-[a-z0-9]+)*$/);
      expect(ids.has(c.id)).toBe(false);
      ids.add(c.id);
      expect(Object.hasOwn(c, 'expect') !== Object.hasOwn(c, 'error')).toBe(true);
    }
  });
});

describe('applyEvent against the transitions fixtures', () => {
  for (const c of file.cases) {
    it(`${c.id}: ${c.description}`, () => {
      if (c.error !== undefined) {
        let caught: unknown;
        try {
          applyEvent(c.input.record, c.input.event);
        } catch (error) {
          caught = error;
        }
        expect(ProtocolError.isInstance(caught)).toBe(true);
        expect((caught as ProtocolError).code).toBe(c.error);
        return;
      }
      expect(applyEvent(c.input.record, c.input.event)).toEqual(c.expect);
    });
  }
});
