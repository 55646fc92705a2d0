import type { RecordStore, TargetUnit } from '@oduflow/master-runner';
import type { RequestRecord, RequestState } from '@oduflow/protocol';

/*
 * The service's own commits, as they happen: every record this process
 * creates or changes (admissions, the outbox relay, the poller, the event
 * recorder, reconciliations) goes through one store wrapper that announces
 * it once the store has made it durable. Subscribers (the dashboard's
 * server-sent events) are told in process: no store is polled for changes,
 * so a hundred open dashboards cost a hundred socket writes, not a hundred
 * store scans. A commit by another process on the same store (the CLI, a
 * second instance on PostgreSQL) is not seen here.
 */

export interface RecordChange {
  /** Increases by one with every change this process announced. */
  readonly seq: number;
  /** The state before the commit; null for a new record. */
  readonly before: RequestState | null;
  readonly record: RequestRecord;
}

export interface ChangeFeed {
  /** Calls `listener` for every later change until the returned function is called. */
  subscribe(listener: (change: RecordChange) => void): () => void;
  /** How many listeners are subscribed now. */
  readonly listeners: number;
  /** The seq of the latest change announced (0 before the first): a page read after it includes it. */
  readonly seq: number;
}

export interface ChangePublisher extends ChangeFeed {
  publish(before: RequestState | null, record: RequestRecord): void;
}

export function createChangeFeed(onListenerError: (error: unknown) => void = () => undefined): ChangePublisher {
  const listeners = new Set<(change: RecordChange) => void>();
  let seq = 0;
  return {
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get listeners() {
      return listeners.size;
    },
    get seq() {
      return seq;
    },
    publish(before, record) {
      seq += 1;
      const change = { seq, before, record };
      for (const listener of [...listeners]) {
        // A listener that throws (a broken socket) must never undo or delay the commit it hears about.
        try {
          listener(change);
        } catch (error) {
          onListenerError(error);
        }
      }
    },
  };
}

/**
 * `store`, announcing each committed create and each committed change on
 * `feed`. Everything else is forwarded as is; an announcement happens after
 * the store's unit returned, so only durable commits are announced.
 */
export function announcingStore(store: RecordStore, feed: ChangePublisher): RecordStore {
  return {
    location: store.location,
    get: (id) => store.get(id),
    getByJid: (jid) => store.getByJid(jid),
    list: (filter, page) => store.list(filter, page),
    countUnresolved: () => store.countUnresolved(),
    scan: (filter, options) => store.scan(filter, options),
    blockersOf: (minionId) => store.blockersOf(minionId),
    async withTarget(minionId, work) {
      const created: RequestRecord[] = [];
      const result = await store.withTarget(minionId, (unit) => {
        const watched: TargetUnit = {
          minionId: unit.minionId,
          blockers: () => unit.blockers(),
          async create(record, options) {
            const outcome = await unit.create(record, options);
            if (outcome.created) created.push(outcome.record);
            return outcome;
          },
        };
        return work(watched);
      });
      // The unit has returned: what it created is committed.
      for (const record of created) feed.publish(null, record);
      return result;
    },
    history: (id) => store.history(id),
    async updateRequest(id, decide, change) {
      const outcome = await store.updateRequest(id, decide, change);
      if (outcome.changed) feed.publish(outcome.before.state, outcome.after);
      return outcome;
    },
    claimKey: (key, options) => store.claimKey(key, options),
    releaseKey: (key, requestId) => store.releaseKey(key, requestId),
    expireKeys: (before) => store.expireKeys(before),
    claimOutbox: (options) => store.claimOutbox(options),
    removeOutbox: (requestId) => store.removeOutbox(requestId),
    deferOutbox: (requestId, at) => store.deferOutbox(requestId, at),
    close: () => store.close(),
  };
}
