import { Mono, ProblemNote, Section, StateBadge, Time, useLiveResource, type Apply } from '../components.js';
import { plural } from '../format.js';
import type { LiveStatus } from '../live.js';
import { hrefOf } from '../router.js';
import { REQUEST_STATES, type BlockedTarget, type BlockerView, type Overview, type RequestEvent, type RequestState } from '../types.js';

interface OverviewData extends Overview {
  readonly seq_from: number;
  readonly seq_to: number;
}

const rank = (state: RequestState): number => REQUEST_STATES.indexOf(state);
const byUrgency = (a: BlockerView, b: BlockerView): number =>
  rank(a.state) - rank(b.state) || (a.updated_at ?? '').localeCompare(b.updated_at ?? '') || a.request_id.localeCompare(b.request_id);

/** One committed change, applied to the counts and the blocked targets. */
const applyChange: Apply<OverviewData> = (event, data, current) => {
  if (event !== 'request') return current;
  const { before, page, blocker } = data as RequestEvent & { readonly blocker: BlockerView };
  const record = page.record;
  const counts = { ...current.counts };
  if (before !== null) counts[before] = Math.max(0, counts[before] - 1);
  counts[record.state] += 1;
  const blocked: BlockedTarget[] = [];
  let placed = false;
  for (const target of current.blocked) {
    let blockers = target.blockers.filter((b) => b.request_id !== record.request_id);
    if (target.minion_id === record.minion_id && page.blocking) {
      blockers = [...blockers, blocker].sort(byUrgency);
      placed = true;
    }
    if (blockers.length > 0) blocked.push({ minion_id: target.minion_id, blockers });
  }
  if (!placed && page.blocking && record.minion_id !== null) blocked.push({ minion_id: record.minion_id, blockers: [blocker] });
  blocked.sort((a, b) => byUrgency(a.blockers[0] as BlockerView, b.blockers[0] as BlockerView) || a.minion_id.localeCompare(b.minion_id));
  return { ...current, counts, total: current.total + (before === null ? 1 : 0), blocked };
};

export function OverviewView({ setStatus }: { readonly setStatus: (status: LiveStatus) => void }) {
  const loaded = useLiveResource<OverviewData>('/ui/api/overview', '/v1/events', applyChange, setStatus);
  if (loaded.state === 'loading') return <p aria-busy="true">Loading the fleet…</p>;
  if (loaded.state === 'failed') return <ProblemNote problem={loaded.problem} />;
  const o = loaded.value;
  const attention = o.counts.quarantined + o.counts.unknown + o.counts.legacy;
  return (
    <>
      <h1>Fleet overview</h1>
      <p class="lede">
        {plural(o.targets, 'target')}, {plural(o.total, 'request')}; <strong data-testid="blocked-count">{plural(o.blocked.length, 'blocked target')}</strong>
        {attention > 0 ? (
          <>
            , <strong class="attention-text">{plural(attention, 'request')} waiting for an operator</strong>
          </>
        ) : null}
        .
      </p>
      {o.blocked_everywhere > 0 ? (
        <p class="banner" role="status">
          {plural(o.blocked_everywhere, 'legacy record')} from before protocol 1 name no target and block every target until an operator reconciles them
          (oduflow-master preflight lists them).
        </p>
      ) : null}
      <Section title="Requests by state" id="counts-title">
        <ul class="counts" data-testid="counts">
          {REQUEST_STATES.map((state) => (
            <li key={state} class={o.counts[state] > 0 ? `count count-${state}` : 'count count-zero'} data-state={state}>
              <span class="count-number">{o.counts[state]}</span> <StateBadge state={state} />
            </li>
          ))}
        </ul>
      </Section>
      <Section title="Blocked targets" id="blocked-title">
        {o.blocked.length === 0 ? (
          <p>No target is blocked: every target accepts a new request.</p>
        ) : (
          <table data-testid="blocked">
            <caption>Each blocked target and the request that blocks it, those waiting for an operator (quarantined, unknown) first.</caption>
            <thead>
              <tr>
                <th scope="col">Target</th>
                <th scope="col">Blocking request</th>
                <th scope="col">State</th>
                <th scope="col">Why</th>
                <th scope="col">Since</th>
              </tr>
            </thead>
            <tbody>
              {o.blocked.map((target) => {
                const first = target.blockers[0] as BlockerView;
                return (
                  <tr key={target.minion_id} data-minion={target.minion_id}>
                    <td>
                      <a href={hrefOf.target(target.minion_id)}>
                        <Mono>{target.minion_id}</Mono>
                      </a>
                    </td>
                    <td>
                      <a href={hrefOf.request(first.request_id)} aria-label={`request ${first.request_id}, blocking ${target.minion_id}`}>
                        <Mono>{first.request_id}</Mono>
                      </a>
                      {target.blockers.length > 1 ? <span class="muted"> and {target.blockers.length - 1} more</span> : null}
                    </td>
                    <td>
                      <StateBadge state={first.state} />
                    </td>
                    <td>{first.reason ?? <span class="muted">—</span>}</td>
                    <td>
                      <Time at={first.updated_at} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </Section>
    </>
  );
}
