import { createFileRecordStore, type RecordStore } from '@oduflow/master-runner';
import { applyEvent, createRequestRecord } from '@oduflow/protocol';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { announcingStore, createChangeFeed, type RecordChange } from './change-feed.js';

const MINION = 'client-0b7e4c8a-1f2d-4e3c-8a9b-5c6d7e8f9a0b';
const AT = '2026-12-02T03:00:00.000Z';
const record = createRequestRecord({ request_id: '6f1c2b8e-4d3a-4b5c-9e7f-0a1b2c3d4e5f', minion_id: MINION, profile: 'configure', state_digest: '', jid: '20261202030000000000', at: AT });

let dir: string;
let raw: RecordStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'oduflow-feed-'));
  raw = await createFileRecordStore({ root: join(dir, 'store') });
});
afterEach(async () => {
  await raw.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the announcing store', () => {
  it('announces a created record and each committed change, in order, after the store holds it', async () => {
    const feed = createChangeFeed();
    const store = announcingStore(raw, feed);
    const heard: (RecordChange & { stored: string | undefined })[] = [];
    feed.subscribe((change) => {
      // What the listener hears is already durable: a plain read of the store sees it.
      void raw.get(change.record.request_id).then((r) => heard.push({ ...change, stored: r?.state }));
    });
    await store.withTarget(MINION, (unit) => unit.create(record));
    await store.updateRequest(record.request_id, (r) => applyEvent(r, { type: 'intent_recorded', at: AT }), { event: 'intent_recorded', source: 'relay' });
    await expectHeard(() => heard.length === 2);
    expect(heard.map((h) => [h.seq, h.before, h.record.state, h.stored])).toEqual([
      [1, null, 'prepared', 'prepared'],
      [2, 'prepared', 'publishing', 'publishing'],
    ]);
    expect(feed.seq).toBe(2);
  });

  it('announces nothing for a unit that changed nothing, or a create that did not store', async () => {
    const feed = createChangeFeed();
    const store = announcingStore(raw, feed);
    await store.withTarget(MINION, (unit) => unit.create(record));
    const heard: RecordChange[] = [];
    feed.subscribe((change) => heard.push(change));
    await store.updateRequest(record.request_id, (r) => r, { event: 'observed', source: 'poller' });
    const again = await store.withTarget(MINION, (unit) => unit.create(record));
    expect(again.created).toBe(false);
    expect(heard).toEqual([]);
  });

  it('commits even when a listener throws, and reports the listener', async () => {
    const failures: unknown[] = [];
    const feed = createChangeFeed((error) => failures.push(error));
    const store = announcingStore(raw, feed);
    feed.subscribe(() => {
      throw new Error('a broken socket');
    });
    const outcome = await store.withTarget(MINION, (unit) => unit.create(record));
    expect(outcome.created).toBe(true);
    expect((await raw.get(record.request_id))?.state).toBe('prepared');
    expect(failures).toHaveLength(1);
  });
});

async function expectHeard(condition: () => boolean): Promise<void> {
  const until = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > until) throw new Error('the announcements did not arrive');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
