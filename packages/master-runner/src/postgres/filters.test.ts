import { describe, expect, it } from 'vitest';
import { limitOf, whereOf } from './filters.js';

describe('RecordFilter as SQL', () => {
  it('passes every value as a parameter, never in the SQL text', () => {
    const where = whereOf({ minionId: "x'; DROP TABLE requests; --", minionIds: ['a', 'b'], states: ['succeeded'] }, 'after-me');
    expect(where.sql).toBe('WHERE minion_id = $1 AND minion_id = ANY($2::text[]) AND state = ANY($3::text[]) AND request_id > $4');
    expect(where.params).toEqual(["x'; DROP TABLE requests; --", ['a', 'b'], ['succeeded'], 'after-me']);
  });

  it('names the blocking column whenever only blocking records can match, so the unresolved index serves the walk', () => {
    expect(whereOf({ unresolved: true }).sql).toBe('WHERE blocking');
    expect(whereOf({ states: ['publishing', 'published', 'running'] }).sql).toBe('WHERE blocking AND state = ANY($1::text[])');
    expect(whereOf({ states: ['published', 'succeeded'] }).sql).toBe('WHERE state = ANY($1::text[])');
    expect(whereOf({}).sql).toBe('');
  });

  it('refuses a page whose limit is not a positive whole number or whose start is not a string', () => {
    expect(limitOf({ limit: 5 })).toBe(5);
    expect(limitOf(undefined)).toBeUndefined();
    for (const page of [{ limit: 0 }, { limit: 2.5 }, { after: 7 as unknown as string }]) {
      expect(() => limitOf(page)).toThrow(expect.objectContaining({ code: 'invalid_input', detail: 'invalid_page' }));
    }
  });
});
