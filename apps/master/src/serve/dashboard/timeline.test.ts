import {
  appendHistory,
  applyEvent,
  changeEntry,
  createRequestRecord,
  creationEntry,
  nextSeq,
  type HistorySource,
  type ProtocolRequestRecord,
  type RequestEvent,
  type RequestHistory,
  type RequestRecord,
} from '@oduflow/protocol';
import { describe, expect, it } from 'vitest';
import { TIMELINE_STEPS, receiptOf, timelineOf, withHistory } from './timeline.js';

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const T0 = '2026-12-02T03:00:00.000Z';
const at = (s: number): string => new Date(Date.parse(T0) + s * 1000).toISOString();

function fresh(): ProtocolRequestRecord {
  return createRequestRecord({ request_id: '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f', minion_id: MINION, profile: 'configure', state_digest: '', jid: '20261202030000000000', at: T0 });
}

function through(...events: ((r: RequestRecord, i: number) => RequestEvent)[]): ProtocolRequestRecord {
  return events.reduce<RequestRecord>((r, event, i) => applyEvent(r, event(r, i + 1)), fresh()) as ProtocolRequestRecord;
}

const intent = (_r: RequestRecord, i: number): RequestEvent => ({ type: 'intent_recorded', at: at(i) });
const acked = (_r: RequestRecord, i: number): RequestEvent => ({ type: 'publish_acked', at: at(i) });
const answer =
  (status: 'running' | 'succeeded' | 'failed' | 'unknown', passed = 0, total = 0) =>
  (r: RequestRecord, i: number): RequestEvent => ({
    type: 'observed',
    at: at(i),
    answer: { protocol: 1, minion_id: MINION, request_id: r.request_id, jid: r.jid as string, profile: 'configure', state_digest: '', status, passed, total },
  });

function byStep(r: ProtocolRequestRecord) {
  return Object.fromEntries(timelineOf(r).map((e) => [e.step, e]));
}

describe('a request timeline from its record', () => {
  it('always lists the five steps in order', () => {
    for (const r of [fresh(), through(intent), through(intent, acked, answer('running'), answer('succeeded', 60, 60))]) {
      expect(timelineOf(r).map((e) => e.step)).toEqual([...TIMELINE_STEPS]);
    }
  });

  it('shows a fresh request as prepared at its creation, with nothing published yet', () => {
    const steps = byStep(fresh());
    expect(steps['prepared']).toMatchObject({ status: 'done', at: T0, source: 'record: created_at' });
    expect(steps['intent']).toMatchObject({ status: 'pending', at: null });
    expect(steps['publication']).toMatchObject({ status: 'pending', at: null });
    expect(steps['outcome']).toMatchObject({ status: 'pending', at: null });
  });

  it('gives the intent its instant only while it is the record’s last write', () => {
    expect(byStep(through(intent))['intent']).toMatchObject({ status: 'done', at: at(1) });
    // Once acknowledged, the instant of the intent was overwritten: not recorded, never guessed.
    const published = byStep(through(intent, acked));
    expect(published['intent']).toMatchObject({ status: 'done', at: null });
    expect(published['publication']).toMatchObject({ status: 'done', at: at(2) });
  });

  it('calls a publication without an acknowledgement uncertain, with the failure', () => {
    const r = through(intent, (_r, i) => ({ type: 'publish_uncertain', at: at(i), failure: 'timeout' }));
    const step = byStep(r)['publication'];
    expect(step).toMatchObject({ status: 'uncertain', at: at(2) });
    expect(step?.summary).toContain('timeout');
    expect(step?.summary).toContain('never published again');
  });

  it('shows the latest answer with its instant and a settled outcome at the time it settled', () => {
    const r = through(intent, acked, answer('running'), answer('failed', 57, 60));
    const steps = byStep(r);
    expect(steps['answer']).toMatchObject({ status: 'done', at: at(4) });
    expect(steps['answer']?.summary).toContain('failed');
    expect(steps['outcome']).toMatchObject({ status: 'done', at: at(4), summary: 'failed: 57 of 60 states passed' });
  });

  it('marks the publication steps skipped for a request the minion’s capability answer ruled out', () => {
    const r = through((_r, i) => ({ type: 'capability_failed', at: at(i), reason: 'not_ready', readiness: ['multiprocessing'] }));
    const steps = byStep(r);
    expect(steps['intent']?.status).toBe('skipped');
    expect(steps['publication']?.status).toBe('skipped');
    expect(steps['outcome']?.summary).toContain('multiprocessing');
  });

  it('shows who reconciled, why, when, and what the request was before', () => {
    const r = through(intent, acked, answer('unknown'), (_r, i) => ({ type: 'reconciled', at: at(i), reason: 'checked the host', actor: 'oncall' }));
    const outcome = byStep(r)['outcome'];
    expect(outcome).toMatchObject({ status: 'done', at: at(4), source: 'record: reconciliation' });
    expect(outcome?.summary).toContain('oncall');
    expect(outcome?.summary).toContain('checked the host');
    expect(outcome?.summary).toContain('may have run');
  });
});

describe('the receipt of a request', () => {
  it('is the minion’s nine-key receipt in canonical JSON for a settled apply', () => {
    const r = through(intent, acked, answer('succeeded', 60, 60));
    expect(receiptOf(r)).toEqual({
      kind: 'receipt',
      canonical: `{"jid":"20261202030000000000","minion_id":"${MINION}","passed":60,"profile":"configure","protocol":1,"request_id":"6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f","state_digest":"","status":"succeeded","total":60}`,
    });
  });

  it('is the status answer for an unknown request, and nothing before a terminal answer', () => {
    expect(receiptOf(through(intent, acked, answer('unknown')))?.kind).toBe('status_answer');
    expect(receiptOf(through(intent, acked, answer('running')))).toBeNull();
    expect(receiptOf(fresh())).toBeNull();
  });
});

/** The record and the history a store would have kept for these events, each committed by `sources[i]`. */
function lived(steps: readonly (readonly [(r: RequestRecord, i: number) => RequestEvent, HistorySource])[]): { record: ProtocolRequestRecord; history: RequestHistory } {
  let record: RequestRecord = fresh();
  let history: RequestHistory = { entries: [creationEntry(fresh(), 'admission')], dropped: 0 };
  steps.forEach(([event, source], index) => {
    const e = event(record, index + 1);
    const after = applyEvent(record, e);
    history = appendHistory(history, changeEntry(record, after, { event: e.type, source }, nextSeq(history)));
    record = after;
  });
  return { record: record, history };
}

describe('a request timeline from its history', () => {
  it('gives every step that happened the time and the source of the entry that recorded it', () => {
    const { record, history } = lived([
      [intent, 'relay'],
      [acked, 'relay'],
      [(_r, i) => ({ type: 'poll_failed', at: at(i), failure: 'timeout' }), 'poller'],
      [answer('running'), 'poller'],
      [answer('succeeded', 60, 60), 'event_stream'],
    ]);
    const steps = Object.fromEntries(withHistory(record, history).map((e) => [e.step, e]));
    expect(steps['prepared']).toMatchObject({ status: 'done', at: T0, evidence: 'history', source: 'history #1: an HTTP admission (created)' });
    // The record alone lost these instants; the history kept them.
    expect(steps['intent']).toMatchObject({ status: 'done', at: at(1), evidence: 'history', source: 'history #2: the outbox relay (intent_recorded)' });
    expect(steps['publication']).toMatchObject({ status: 'done', at: at(2), evidence: 'history', source: 'history #3: the outbox relay (publish_acked)' });
    expect(steps['answer']).toMatchObject({ status: 'done', at: at(5), evidence: 'history', source: 'history #6: salt-api’s event stream (observed)' });
    expect(steps['answer']?.summary).toContain('3 answer(s) in the history (2 from a status poll, 1 from salt-api’s event stream)');
    expect(steps['outcome']).toMatchObject({ status: 'done', at: at(5), evidence: 'history', summary: 'succeeded: 60 of 60 states passed' });
  });

  it('times a publication the minion’s answer overtook by that answer, and keeps pending steps without a time', () => {
    const overtaken = lived([
      [intent, 'relay'],
      [answer('running'), 'event_stream'],
    ]);
    const steps = Object.fromEntries(withHistory(overtaken.record, overtaken.history).map((e) => [e.step, e]));
    expect(steps['publication']).toMatchObject({ status: 'done', at: at(2), source: 'history #3: salt-api’s event stream (observed)' });
    expect(steps['outcome']).toMatchObject({ status: 'pending', at: null, evidence: 'record' });
  });

  it('falls back to the record’s own view for a record written before histories', () => {
    const r = through(intent, acked);
    expect(withHistory(r, { entries: [], dropped: 0 })).toEqual(timelineOf(r));
    expect(timelineOf(r).every((step) => step.evidence === 'record')).toBe(true);
  });
});
