import { useEffect, useState } from 'preact/hooks';
import { api, forgetToken, onSignedOut, storedToken } from './api.js';
import type { LiveStatus } from './live.js';
import { hrefOf, navigate, onLinkClick, usePath } from './router.js';
import type { Whoami } from './types.js';
import { LoginView } from './views/login.js';
import { OverviewView } from './views/overview.js';
import { RequestView } from './views/request.js';
import { RolloutView } from './views/rollout.js';
import { RolloutsView } from './views/rollouts.js';
import { TargetView } from './views/target.js';

const LIVE_TEXT: Readonly<Record<LiveStatus, string>> = { connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…' };

interface SearchAnswer {
  readonly match: 'request' | 'target' | 'none';
  readonly request_id?: string;
  readonly minion_id?: string;
  readonly kind?: string;
}

function Search() {
  const [q, setQ] = useState('');
  const [note, setNote] = useState<string | null>(null);
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    const value = q.trim();
    if (value === '') return;
    try {
      const answer = await api<SearchAnswer>(`/ui/api/search?q=${encodeURIComponent(value)}`);
      if (answer.match === 'request' && answer.request_id !== undefined) {
        setNote(null);
        navigate(`/requests/${encodeURIComponent(answer.request_id)}`);
      } else if (answer.match === 'target' && answer.minion_id !== undefined) {
        setNote(null);
        navigate(`/targets/${encodeURIComponent(answer.minion_id)}`);
      } else {
        setNote(answer.kind === 'unrecognized' ? 'Not a minion id (client-<uuid>), a request id (a UUID) or a JID (20 digits).' : `No ${answer.kind?.replace('_', ' ') ?? 'match'} of yours matches.`);
      }
    } catch {
      setNote('The search did not answer; try again.');
    }
  };
  return (
    <form role="search" class="search" onSubmit={(e) => void submit(e)}>
      <label for="search">Find a minion id, request id or JID</label>
      <input id="search" type="search" value={q} spellcheck={false} autocomplete="off" onInput={(e) => setQ(e.currentTarget.value)} aria-describedby={note === null ? undefined : 'search-note'} />
      <button type="submit">Find</button>
      <p id="search-note" class="search-note" role="status">
        {note}
      </p>
    </form>
  );
}

function Page({ path, me, setStatus }: { readonly path: string; readonly me: Whoami; readonly setStatus: (s: LiveStatus) => void }) {
  const [, section, id] = path.split('/').map((part) => decodeURIComponent(part));
  if (section === 'requests' && id !== undefined && id !== '') return <RequestView key={id} id={id} me={me} setStatus={setStatus} />;
  if (section === 'targets' && id !== undefined && id !== '') return <TargetView key={id} minionId={id} setStatus={setStatus} />;
  if (section === 'rollouts' && id !== undefined && id !== '') return <RolloutView key={id} runId={id} setStatus={setStatus} />;
  if (section === 'rollouts') return <RolloutsView />;
  if (section === '' || section === undefined) return <OverviewView setStatus={setStatus} />;
  return (
    <>
      <h1>Not a page of the dashboard</h1>
      <p>
        Go to the <a href={hrefOf.overview()}>fleet overview</a>.
      </p>
    </>
  );
}

export function App() {
  const path = usePath();
  const [me, setMe] = useState<Whoami | null | 'checking'>(storedToken() === null ? null : 'checking');
  const [status, setStatus] = useState<LiveStatus>('connecting');

  useEffect(() => onSignedOut(() => setMe(null)), []);
  useEffect(() => {
    if (me !== 'checking') return;
    api<Whoami>('/ui/api/whoami').then(setMe, () => {
      forgetToken();
      setMe(null);
    });
  }, [me]);
  useEffect(() => {
    document.addEventListener('click', onLinkClick);
    return () => document.removeEventListener('click', onLinkClick);
  }, []);
  useEffect(() => {
    const heading = document.querySelector('h1')?.textContent;
    document.title = heading === undefined || heading === '' ? 'oduflow dashboard' : `${heading} · oduflow`;
  });

  if (me === 'checking') return <p aria-busy="true">Checking your token…</p>;
  if (me === null) return <LoginView onSignedIn={setMe} />;
  return (
    <>
      <a class="skip" href="#main">
        Skip to the content
      </a>
      <header class="top">
        <a class="brand" href={hrefOf.overview()}>
          oduflow
        </a>
        <nav aria-label="Dashboard">
          <ul>
            <li>
              <a href={hrefOf.overview()} aria-current={path === '/' ? 'page' : undefined}>
                Overview
              </a>
            </li>
            {me.rollouts ? (
              <li>
                <a href={hrefOf.rollouts()} aria-current={path.startsWith('/rollouts') ? 'page' : undefined}>
                  Rollouts
                </a>
              </li>
            ) : null}
          </ul>
        </nav>
        <Search />
        <p class={`live live-${status}`} role="status" data-testid="live-status">
          {LIVE_TEXT[status]}
        </p>
        <div class="who">
          <span>
            {me.actor} <span class="muted">({me.tenant}: {me.scopes.join(', ')})</span>
          </span>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              forgetToken();
              setMe(null);
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Page path={path} me={me} setStatus={setStatus} />
      </main>
    </>
  );
}
