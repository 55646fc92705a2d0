import { useEffect, useState } from 'preact/hooks';

/*
 * History-API routing under /ui/: every page has a real URL an operator can
 * bookmark or paste (the service answers the HTML shell for each).
 */

const BASE = '/ui';

const listeners = new Set<() => void>();

export function navigate(path: string, replace = false): void {
  const url = `${BASE}${path}`;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const listener of [...listeners]) listener();
  window.scrollTo(0, 0);
}

function currentPath(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return path === '' ? '/' : path;
}

export function usePath(): string {
  const [path, setPath] = useState(currentPath);
  useEffect(() => {
    const update = (): void => setPath(currentPath());
    listeners.add(update);
    window.addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      window.removeEventListener('popstate', update);
    };
  }, []);
  return path;
}

/** A click on an in-app link navigates without a reload (a modified click still opens a tab). */
export function onLinkClick(event: MouseEvent): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const anchor = (event.target as Element | null)?.closest('a');
  if (anchor === null || anchor === undefined) return;
  const href = anchor.getAttribute('href');
  if (href === null || !href.startsWith(`${BASE}/`) || anchor.target !== '') return;
  event.preventDefault();
  navigate(href.slice(BASE.length));
}

export const hrefOf = {
  overview: (): string => `${BASE}/`,
  request: (id: string): string => `${BASE}/requests/${encodeURIComponent(id)}`,
  target: (minionId: string): string => `${BASE}/targets/${encodeURIComponent(minionId)}`,
  rollouts: (): string => `${BASE}/rollouts`,
  rollout: (runId: string): string => `${BASE}/rollouts/${encodeURIComponent(runId)}`,
};
