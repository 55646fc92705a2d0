import { Mono, ProblemNote, Section, StateBadge, Time, useLiveResource, type Apply } from '../components.js';
import type { LiveStatus } from '../live.js';
import { hrefOf } from '../router.js';
import { REQUEST_STATES, type BlockerView, type RequestEvent, type TargetPage } from '../types.js';

interface TargetData extends TargetPage {
  readonly seq: number;
}

const rank = (b: BlockerView): number => REQUEST_STATES.indexOf(b.state);

function Rows({ rows }: { readonly rows: readonly BlockerView[] }) {
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Request</th>
          <th scope="col">State</th>
          <th scope="col">Profile</th>
          <th scope="col">JID</th>
          <th scope="col">Why</th>
          <th scope="col">Updated</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={row.request_id}>
            <td>
              <a href={hrefOf.request(row.request_id)}>
                <Mono>{row.request_id}</Mono>
              </a>
            </td>
            <td>
              <StateBadge state={row.state} />
            </td>
            <td>{row.profile ?? '—'}</td>
            <td>{row.jid === null ? '—' : <Mono>{row.jid}</Mono>}</td>
            <td>{row.reason ?? '—'}</td>
            <td>
              <Time at={row.updated_at} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function TargetView({ minionId, setStatus }: { readonly minionId: string; readonly setStatus: (status: LiveStatus) => void }) {
  const apply: Apply<TargetData> = (event, data, current) => {
    if (event !== 'request') return current;
    const change = data as RequestEvent & { readonly blocker: BlockerView };
    if (change.page.record.minion_id !== minionId) return current;
    const id = change.page.record.request_id;
    const requests = [change.blocker, ...current.requests.filter((r) => r.request_id !== id)];
    const blockers = [...current.blockers.filter((r) => r.request_id !== id), ...(change.page.blocking ? [change.blocker] : [])].sort((a, b) => rank(a) - rank(b));
    return { ...current, requests, blockers, blocked: blockers.length > 0 };
  };
  const loaded = useLiveResource<TargetData>(`/ui/api/targets/${encodeURIComponent(minionId)}`, '/v1/events', apply, setStatus);
  if (loaded.state === 'loading') return <p aria-busy="true">Loading the target…</p>;
  if (loaded.state === 'failed') return <ProblemNote problem={loaded.problem} />;
  const t = loaded.value;
  return (
    <>
      <h1>
        Target <Mono>{t.minion_id}</Mono>
      </h1>
      <p class="lede" data-testid="target-status">
        {t.blocked ? <strong class="attention-text">Blocked: a new request to this target is refused until the requests below settle or are reconciled.</strong> : 'Not blocked: it accepts a new request.'}
      </p>
      {t.blockers.length > 0 ? (
        <Section title="Blocking requests" id="blockers-title">
          <Rows rows={t.blockers} />
        </Section>
      ) : null}
      <Section title="Requests" id="requests-title">
        {t.requests.length === 0 ? <p>No request for this target yet.</p> : <Rows rows={t.requests} />}
        {t.more ? <p class="note">Only the newest {t.requests.length} are shown.</p> : null}
      </Section>
    </>
  );
}
