/*
 * A bounded pool over an async source: `concurrency` workers pull the next
 * item when they are free, so a source that pages through a store is read
 * only as fast as the work goes (a fleet's backlog is never all in memory),
 * and at most `concurrency` items are in work at once. Hand-written because
 * p-limit and p-queue take tasks pushed in advance, which is the whole
 * backlog in memory.
 */

export interface PoolOptions<T> {
  /** Workers, each with one batch in work at a time. */
  readonly concurrency: number;
  /** Items a worker takes at once (default 1). */
  readonly batchSize?: number;
  /** Items to skip without work (counted by the caller, never batched). */
  readonly accept?: (item: T) => boolean;
  /** Stops taking new items; the batches in work finish. */
  readonly signal?: AbortSignal;
}

export async function forEachConcurrently<T>(
  source: AsyncIterable<readonly T[]> | Iterable<T>,
  options: PoolOptions<T>,
  work: (batch: T[]) => Promise<void>,
): Promise<void> {
  const next = pull(source);
  const batchSize = options.batchSize ?? 1;
  const accept = options.accept ?? (() => true);
  const take = async (): Promise<T[]> => {
    const batch: T[] = [];
    while (batch.length < batchSize && options.signal?.aborted !== true) {
      const item = await next();
      if (item === undefined) break;
      if (accept(item.value)) batch.push(item.value);
    }
    return batch;
  };
  const worker = async (): Promise<void> => {
    for (let batch = await take(); batch.length > 0; batch = await take()) await work(batch);
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
}

/** One shared cursor over the source; concurrent callers get distinct items, `undefined` once it is exhausted. */
function pull<T>(source: AsyncIterable<readonly T[]> | Iterable<T>): () => Promise<{ value: T } | undefined> {
  if (Symbol.iterator in source) {
    const items = source[Symbol.iterator]();
    return () => {
      const step = items.next();
      return Promise.resolve(step.done === true ? undefined : { value: step.value });
    };
  }
  const pages = source[Symbol.asyncIterator]();
  let page: readonly T[] = [];
  let index = 0;
  let exhausted = false;
  let fetching: Promise<void> | undefined;
  return async () => {
    for (;;) {
      if (index < page.length) return { value: page[index++] as T };
      if (exhausted) return undefined;
      fetching ??= pages.next().then((step) => {
        fetching = undefined;
        if (step.done === true) exhausted = true;
        else {
          page = step.value;
          index = 0;
        }
      });
      await fetching;
    }
  };
}
