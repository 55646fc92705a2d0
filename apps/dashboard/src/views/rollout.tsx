import { Mono, ProblemNote, Section, StateBadge, Time, useLiveResource, type Apply } from '../components.js';
import { duration } from '../format.js';
import type { LiveStatus } from '../live.js';
import { hrefOf } from '../router.js';
import type { RequestEvent, RequestState, RolloutReport, RolloutTargetRow } from '../types.js';

interface RolloutData extends RolloutReport {
  /** Live states of the rollout's requests, from the event stream (between the rollout's own checkpoints). */
  readonly live?: Readonly<Record<string, RequestState>>;
}

const SETTLED_OUTCOMES = new Set(['succeeded', 'failed', 'unknown', 'quarantined', 'unresolved', 'rejected', 'reconciled', 'blocked', 'unreachable', 'no_target', 'skipped']);

const apply: Apply<RolloutData> = (event, data, current) => {
  if (event === 'rollout') {
    const report = (data as { readonly report: RolloutReport }).report;
    return { ...report, ...(current.source === undefined ? {} : { source: current.source }), ...(current.live === undefined ? {} : { live: current.live }) };
  }
  if (event !== 'request') return current;
  const record = (data as RequestEvent).page.record;
  if (!current.targets.some((row) => row.request_id === record.request_id)) return current;
  return { ...current, live: { ...current.live, [record.request_id]: record.state } };
};

function Outcome({ row, live }: { readonly row: RolloutTargetRow; readonly live: RequestState | undefined }) {
  if (row.outcome !== 'pending') return <StateBadge state={row.outcome} />;
  const state = live ?? row.record_state;
  return (
    <>
      <StateBadge state="pending" />
      {state === null ? null : (
        <span class="muted">
          {' '}
          (request {state})
        </span>
      )}
    </>
  );
}

function RunLink({ id }: { readonly id: string }) {
  return (
    <a href={hrefOf.rollout(id)}>
      <Mono>{id}</Mono>
    </a>
  );
}

export function RolloutView({ runId, setStatus }: { readonly runId: string; readonly setStatus: (status: LiveStatus) => void }) {
  const loaded = useLiveResource<RolloutData>(`/ui/api/rollouts/${encodeURIComponent(runId)}`, `/v1/events?rollout=${encodeURIComponent(runId)}`, apply, setStatus);
  if (loaded.state === 'loading') return <p aria-busy="true">Loading the rollout…</p>;
  if (loaded.state === 'failed') return <ProblemNote problem={loaded.problem} />;
  const r = loaded.value;
  const settled = r.targets.filter((row) => SETTLED_OUTCOMES.has(row.outcome)).length;
  const total = r.target_count ?? r.targets.length;
  const budget = r.max_unresolved ?? 0;
  const counts = Object.entries(r.counts).filter(([, n]) => n > 0);
  return (
    <>
      <h1>
        Rollout <Mono>{r.source === 'http' ? r.rollout_id : r.run_id}</Mono>
      </h1>
      <dl class="facts">
        <dt>Status</dt>
        <dd data-testid="rollout-status">
          <StateBadge state={r.status} />
          {r.halted === null ? null : <span class="attention-text"> halted: {r.halted}</span>}
          {r.dry_run ? <span class="muted"> (dry run)</span> : null}
        </dd>
        <dt>Profile</dt>
        <dd>{r.profile ?? '—'}</dd>
        <dt>Batch size</dt>
        <dd>{r.batch_size ?? '—'}</dd>
        <dt>Started</dt>
        <dd>
          <Time at={r.started_at} />
        </dd>
        <dt>Duration</dt>
        <dd>{duration(r.duration_ms)}</dd>
        <dt>Run</dt>
        <dd>
          <Mono>{r.run_id}</Mono>
          {r.source === 'http' ? <span class="muted"> (its latest run; a resume after a restart is a new run of the same rollout)</span> : null}
        </dd>
        {r.resumed_from === null ? null : (
          <>
            <dt>Resumed from</dt>
            <dd>{r.source === 'cli' ? <RunLink id={r.resumed_from} /> : <Mono>{r.resumed_from}</Mono>}</dd>
          </>
        )}
        {r.superseded_by === null ? null : (
          <>
            <dt>Resumed by</dt>
            <dd>{r.source === 'cli' ? <RunLink id={r.superseded_by} /> : <Mono>{r.superseded_by}</Mono>}</dd>
          </>
        )}
      </dl>
      <div class="meters">
        <div class="meter-row">
          <label for="rollout-progress">Targets settled</label>
          <progress id="rollout-progress" max={Math.max(total, 1)} value={settled} />
          <span data-testid="rollout-progress-text">
            {settled} of {total}
          </span>
        </div>
        <div class="meter-row">
          <label for="rollout-budget">Error budget used</label>
          <meter id="rollout-budget" min={0} max={Math.max(budget, 1)} value={Math.min(r.budget_used, Math.max(budget, 1))} high={Math.max(budget, 1)} />
          <span data-testid="rollout-budget-text">
            {r.budget_used} of {budget} (failed or unresolved outcomes a rollout may absorb before it halts)
          </span>
        </div>
      </div>
      <p class="counts-line" data-testid="rollout-counts">
        {counts.map(([key, n]) => (
          <span key={key} class="count-pair">
            <StateBadge state={key} /> {n}
          </span>
        ))}
      </p>
      <Section title="Batches" id="batches-title">
        {r.stages.map((stage) => {
          const rows = r.targets.filter((_row, index) => stageOf(r, index) === stage.stage_id);
          return (
            <section key={stage.stage_id} class="batch" aria-labelledby={`${stage.stage_id}-title`} data-stage={stage.stage_id}>
              <h3 id={`${stage.stage_id}-title`}>
                {stage.stage_id} <StateBadge state={stage.status} />{' '}
                <span class="muted">
                  {stage.targets === null ? 'not reached' : `${stage.targets} targets`}
                  {stage.duration_ms === null ? '' : `, ${duration(stage.duration_ms)}`}
                </span>
                {stage.error === null ? null : <span class="attention-text"> {stage.error}</span>}
              </h3>
              {rows.length === 0 ? null : (
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Target</th>
                      <th scope="col">Request</th>
                      <th scope="col">Outcome</th>
                      <th scope="col">States passed</th>
                      <th scope="col">Why</th>
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((row) => (
                      <tr key={row.minion_id}>
                        <td>
                          <a href={hrefOf.target(row.minion_id)}>
                            <Mono>{row.minion_id}</Mono>
                          </a>
                        </td>
                        <td>
                          {row.request_id === null ? (
                            '—'
                          ) : (
                            <a href={hrefOf.request(row.request_id)}>
                              <Mono>{row.request_id}</Mono>
                            </a>
                          )}
                        </td>
                        <td>
                          <Outcome row={row} live={row.request_id === null ? undefined : r.live?.[row.request_id]} />
                        </td>
                        <td>{row.total === null ? '—' : `${row.passed ?? 0} of ${row.total}`}</td>
                        <td>
                          {row.reason ?? ''}
                          {row.detail === null ? '' : ` (${row.detail})`}
                          {row.blocked_by === null ? null : (
                            <>
                              {' '}
                              by{' '}
                              <a href={hrefOf.request(row.blocked_by)}>
                                <Mono>{row.blocked_by}</Mono>
                              </a>
                            </>
                          )}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              )}
            </section>
          );
        })}
      </Section>
    </>
  );
}

/** Which batch a report row belongs to: rows come batch after batch, each batch as many as its stage's `targets`. */
function stageOf(r: RolloutReport, index: number): string | undefined {
  let start = 0;
  for (const stage of r.stages) {
    const size = stage.targets ?? 0;
    if (index < start + size) return stage.stage_id;
    start += size;
  }
  return undefined;
}
