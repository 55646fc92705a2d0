import { BLOCKING_STATES } from '@oduflow/protocol';
import { MasterRunnerError } from '../errors.js';
import type { ListPage, RecordFilter } from '../record-store.js';

/*
 * A RecordFilter (and a keyset page) as a WHERE clause with numbered
 * parameters. Every value is a parameter, never spliced into the SQL.
 * Records come back in request-id order (byte order: the column is
 * COLLATE "C"), so `after` pages by keyset on the primary key.
 */

const BLOCKING: ReadonlySet<string> = new Set(BLOCKING_STATES);

export interface Where {
  readonly sql: string;
  readonly params: readonly unknown[];
}

export function whereOf(filter: RecordFilter, after?: string): Where {
  const conditions: string[] = [];
  const params: unknown[] = [];
  const param = (value: unknown): string => {
    params.push(value);
    return `$${params.length}`;
  };
  if (filter.minionId !== undefined) conditions.push(`minion_id = ${param(filter.minionId)}`);
  if (filter.minionIds !== undefined) conditions.push(`minion_id = ANY(${param([...filter.minionIds])}::text[])`);
  const states = filter.states;
  // Only blocking states asked for: say so, so the planner can walk the unresolved index
  // (the answer is the same: the store writes `blocking` from the state).
  const onlyBlocking = filter.unresolved === true || (states !== undefined && states.every((state) => BLOCKING.has(state)));
  if (onlyBlocking) conditions.push('blocking');
  if (states !== undefined) conditions.push(`state = ANY(${param([...states])}::text[])`);
  if (after !== undefined) conditions.push(`request_id > ${param(after)}`);
  return { sql: conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`, params };
}

/** The page's limit as a positive integer, or none; refuses a page the file store refuses too. */
export function limitOf(page: ListPage | undefined): number | undefined {
  const fields = (page ?? {}) as Record<string, unknown>;
  const { after, limit } = fields;
  if ((after !== undefined && typeof after !== 'string') || (limit !== undefined && (!Number.isSafeInteger(limit) || (limit as number) <= 0))) {
    throw new MasterRunnerError('invalid_input', 'a page needs a request id to start after and a positive whole limit', { detail: 'invalid_page' });
  }
  return limit as number | undefined;
}

export function pageSizeOf(pageSize: number | undefined, fallback: number): number {
  const size = pageSize ?? fallback;
  if (!Number.isSafeInteger(size) || size <= 0) throw new MasterRunnerError('invalid_input', 'the page size must be a positive integer');
  return size;
}
