import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { Mono, ProblemNote, StateBadge, Time, type Loaded } from '../components.js';
import { hrefOf } from '../router.js';
import type { RolloutSummary } from '../types.js';

export function RolloutsView() {
  const [loaded, setLoaded] = useState<Loaded<{ readonly items: readonly RolloutSummary[]; readonly unreadable: number }>>({ state: 'loading' });
  useEffect(() => {
    api<{ items: RolloutSummary[]; unreadable: number }>('/ui/api/rollouts').then(
      (value) => setLoaded({ state: 'ready', value }),
      (problem: unknown) => setLoaded({ state: 'failed', problem }),
    );
  }, []);
  if (loaded.state === 'loading') return <p aria-busy="true">Loading rollouts…</p>;
  if (loaded.state === 'failed') return <ProblemNote problem={loaded.problem} />;
  const { items, unreadable } = loaded.value;
  return (
    <>
      <h1>Rollouts</h1>
      {unreadable > 0 ? <p class="banner">{unreadable} rollout run(s) could not be read (oduflow-master rollout list says which).</p> : null}
      {items.length === 0 ? (
        <p>No rollout of your targets yet.</p>
      ) : (
        <table>
          <caption>Newest first; a rollout is shown once it has reached its first batch.</caption>
          <thead>
            <tr>
              <th scope="col">Rollout</th>
              <th scope="col">Status</th>
              <th scope="col">Profile</th>
              <th scope="col">Batches</th>
              <th scope="col">Error budget</th>
              <th scope="col">Started</th>
            </tr>
          </thead>
          <tbody>
            {items.map((r) => (
              <tr key={r.run_id}>
                <td>
                  <a href={hrefOf.rollout(r.run_id)}>
                    <Mono>{r.run_id}</Mono>
                  </a>
                  {r.dry_run ? <span class="muted"> (dry run)</span> : null}
                </td>
                <td>
                  <StateBadge state={r.status} />
                </td>
                <td>{r.profile ?? '—'}</td>
                <td>
                  {r.stages_settled} of {r.stages}
                </td>
                <td>
                  {r.budget_used} of {r.max_unresolved ?? '—'}
                </td>
                <td>
                  <Time at={r.started_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
