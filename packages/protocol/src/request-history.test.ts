import { describe, expect, it } from 'vitest';
import {
  HISTORY_HEAD,
  HISTORY_MAX_ENTRIES,
  HISTORY_TAIL,
  HistoryEntrySchema,
  NO_HISTORY,
  appendHistory,
  changeEntry,
  creationEntry,
  nextSeq,
  parseRequestHistory,
  type RequestHistory,
} from './request-history.js';
import type { ProtocolRequestRecord } from './request-record.js';
import { applyEvent } from './transitions.js';
import { BASE_RECORD, T0, T1, T2 } from '../tests/support.js';


const base = BASE_RECORD;

/** A history of `n` entries, as a store would grow it. */
function grown(n: number): RequestHistory {
  let history: RequestHistory = { entries: [creationEntry(base, 'admission')], dropped: 0 };
  let record: ProtocolRequestRecord = applyEvent(base, { type: 'intent_recorded', at: T1 }) as ProtocolRequestRecord;
  for (let i = 1; i < n; i += 1) {
    const after: ProtocolRequestRecord = { ...record, updated_at: T2 };
    history = appendHistory(history, changeEntry(record, after, { event: 'poll_failed', source: 'poller' }, nextSeq(history)));
    record = after;
  }
  return history;
}

describe('request history entries', () => {
  it('records a creation from no state, with the source that created it', () => {
    expect(creationEntry(base, 'dispatch')).toEqual({
      seq: 1,
      at: T0,
      from_state: null,
      to_state: 'prepared',
      event: 'created',
      source: 'dispatch',
      observed: null,
      reason_code: null,
    });
  });

  it('records an observed status with the state change and the reason code, never the answer itself', () => {
    const published = { ...base, state: 'published' as const, publish_attempts: 1 };
    const answer = { protocol: 1 as const, minion_id: base.minion_id, request_id: base.request_id, jid: base.jid, profile: base.profile, state_digest: '' };
    const after = applyEvent(published, { type: 'observed', at: T2, answer: { ...answer, status: 'refused', reason: 'execution_busy', passed: 0, total: 0 } });
    const entry = changeEntry(published, after, { event: 'observed', source: 'event_stream' }, 4);
    expect(entry).toEqual({
      seq: 4,
      at: T2,
      from_state: 'published',
      to_state: 'rejected',
      event: 'observed',
      source: 'event_stream',
      observed: 'refused',
      reason_code: 'refused',
    });
    expect(HistoryEntrySchema.safeParse(entry).success).toBe(true);
  });

  it('keeps an operator reconciliation reason out of the entry', () => {
    const after = applyEvent(base, { type: 'reconciled', at: T1, reason: 'checked by hand on the box', actor: 'ops' });
    const entry = changeEntry(base, after, { event: 'reconciled', source: 'reconcile' }, 2);
    expect(JSON.stringify(entry)).not.toContain('checked by hand');
    expect(JSON.stringify(entry)).not.toContain('ops');
    expect(entry).toMatchObject({ from_state: 'prepared', to_state: 'reconciled', at: T1, observed: null, reason_code: null });
  });

  it('refuses free text or a state outside the closed sets', () => {
    const entry = creationEntry(base, 'admission');
    expect(HistoryEntrySchema.safeParse({ ...entry, comment: 'x' }).success).toBe(false);
    expect(HistoryEntrySchema.safeParse({ ...entry, source: 'somewhere' }).success).toBe(false);
    expect(HistoryEntrySchema.safeParse({ ...entry, event: 'retried' }).success).toBe(false);
    expect(HistoryEntrySchema.safeParse({ ...entry, reason_code: 'because I said so' }).success).toBe(false);
  });
});

describe('the history cap', () => {
  it('keeps every entry up to the cap, numbered 1..n', () => {
    const history = grown(HISTORY_MAX_ENTRIES);
    expect(history.dropped).toBe(0);
    expect(history.entries.map((e) => e.seq)).toEqual(Array.from({ length: HISTORY_MAX_ENTRIES }, (_, i) => i + 1));
    expect(parseRequestHistory(history)).toEqual(history);
  });

  it('keeps the first and the last entries of a flapping request and counts the ones let go', () => {
    const history = grown(HISTORY_MAX_ENTRIES + 100);
    expect(history.entries).toHaveLength(HISTORY_MAX_ENTRIES);
    expect(history.dropped).toBe(100);
    expect(history.entries[0]?.event).toBe('created');
    expect(history.entries[HISTORY_HEAD - 1]?.seq).toBe(HISTORY_HEAD);
    expect(history.entries[HISTORY_HEAD]?.seq).toBe(HISTORY_HEAD + 101);
    expect(history.entries.at(-1)?.seq).toBe(HISTORY_MAX_ENTRIES + 100);
    expect(history.entries.slice(HISTORY_HEAD)).toHaveLength(HISTORY_TAIL);
    expect(nextSeq(history)).toBe(HISTORY_MAX_ENTRIES + 101);
    expect(parseRequestHistory(history)).toEqual(history);
  });

  it('refuses a stored history whose numbering does not match its gap', () => {
    const history = grown(5);
    expect(parseRequestHistory({ ...history, dropped: 1 })).toBeUndefined();
    expect(parseRequestHistory({ entries: [...history.entries].reverse(), dropped: 0 })).toBeUndefined();
    expect(parseRequestHistory(NO_HISTORY)).toEqual(NO_HISTORY);
  });
});
