import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiProblem, api } from './api.js';
import { instant } from './format.js';
import { follow, type LiveStatus } from './live.js';
import type { RequestState } from './types.js';

/** What each state means for the operator: waiting for a human, settling by itself, or settled. */
const STATE_KIND: Readonly<Record<RequestState, 'attention' | 'active' | 'settled' | 'bad'>> = {
  quarantined: 'attention',
  unknown: 'attention',
  legacy: 'attention',
  publishing: 'active',
  published: 'active',
  running: 'active',
  prepared: 'active',
  failed: 'bad',
  rejected: 'settled',
  succeeded: 'settled',
  reconciled: 'settled',
};

/** A state as text with a colour that repeats it (never colour alone). */
export function StateBadge({ state }: { readonly state: string }) {
  const kind = (STATE_KIND as Record<string, string | undefined>)[state] ?? 'other';
  return <span class={`badge badge-${kind} state-${state}`}>{state}</span>;
}

export function Time({ at }: { readonly at: string | null | undefined }) {
  if (at === null || at === undefined) return <span class="muted">not recorded</span>;
  return <time dateTime={at}>{instant(at)}</time>;
}

export function Mono({ children }: { readonly children: ComponentChildren }) {
  return <code class="mono">{children}</code>;
}

export function ProblemNote({ problem }: { readonly problem: unknown }) {
  const text = problem instanceof ApiProblem ? `${problem.message} (${problem.code})` : 'something went wrong';
  return (
    <p class="problem" role="alert">
      {text}
    </p>
  );
}

export type Loaded<T> = { readonly state: 'loading' } | { readonly state: 'ready'; readonly value: T } | { readonly state: 'failed'; readonly problem: unknown };

/** What a page does with one event: the new value, or 'reload' when it cannot tell. */
export type Apply<T> = (event: string, data: unknown, current: T) => T | 'reload';

interface Sequenced {
  readonly seq?: number;
  readonly seq_from?: number;
  readonly seq_to?: number;
}

function seqOf(data: unknown): number {
  return typeof data === 'object' && data !== null && typeof (data as { seq?: unknown }).seq === 'number' ? (data as { seq: number }).seq : Number.POSITIVE_INFINITY;
}

/**
 * Loads `path` and follows the event stream `live` (a /v1/events URL) while
 * the page is shown. Each (re)connection reloads (events are not replayed);
 * events that arrive while a load is in flight are held, and after it
 * those the load already saw (seq up to the load's `seq`/`seq_from`) are
 * dropped, those it may or may not have seen (up to `seq_to`) cause one
 * more load, and the rest are applied in order.
 */
export function useLiveResource<T extends object>(path: string, live: string, apply: Apply<T>, setStatus: (status: LiveStatus) => void): Loaded<T> {
  const [loaded, setLoaded] = useState<Loaded<T>>({ state: 'loading' });
  useEffect(() => {
    let stopped = false;
    let current: T | undefined;
    let held: { event: string; data: unknown }[] | undefined;
    const show = (value: T): void => {
      current = value;
      setLoaded({ state: 'ready', value });
    };
    const load = (): void => {
      held = [];
      api<T>(path).then(
        (value) => {
          if (stopped) return;
          const pending = held ?? [];
          held = undefined;
          const marks = value as Sequenced;
          const from = marks.seq ?? marks.seq_from ?? 0;
          const to = marks.seq_to ?? from;
          let next: T | 'reload' = value;
          for (const { event, data } of pending) {
            const seq = seqOf(data);
            if (seq <= from) continue;
            next = seq <= to ? 'reload' : apply(event, data, next);
            if (next === 'reload') break;
          }
          if (next === 'reload') return load();
          show(next);
        },
        (problem: unknown) => {
          held = undefined;
          if (!stopped) setLoaded({ state: 'failed', problem });
        },
      );
    };
    setLoaded({ state: 'loading' });
    const stop = follow(live, {
      onStatus: setStatus,
      onEvent: (event, data) => {
        if (event === 'ready') return load();
        if (held !== undefined) return void held.push({ event, data });
        if (current === undefined) return;
        const next = apply(event, data, current);
        if (next === 'reload') return load();
        show(next);
      },
    });
    return () => {
      stopped = true;
      stop();
    };
  }, [path, live]);
  return loaded;
}

export function Section({ title, children, id }: { readonly title: string; readonly children: ComponentChildren; readonly id: string }) {
  return (
    <section aria-labelledby={id} class="panel">
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}
