/*
 * A bounded pool over an async source: `concurrency` workers pull the next
 * item when they are free, so a source that pages through a store is read
 * only as fast as the work goes (a fleet's backlog is never all in memory),
 * and at most `concurrency` items are in work at once. Hand-written because
 * p-limit and p-queue take tasks pushed in advance, which is the whole
 * backlog in memory.
 */

export async function forEachConcurrently<T>(
  source: AsyncIterable<readonly T[]> | Iterable<T>,
  concurrency: number,
  work: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  const next = pull(source);
  const worker = async (): Promise<void> => {
    for (let item = await next(); item !== undefined && signal?.aborted !== true; item = await next()) await work(item.value);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
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
