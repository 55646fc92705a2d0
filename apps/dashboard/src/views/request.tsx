import { useState } from "preact/hooks";
import { ApiProblem, api } from "../api.js";
import {
  Mono,
  ProblemNote,
  Section,
  StateBadge,
  Time,
  useLiveResource,
  type Apply,
} from "../components.js";
import type { LiveStatus } from "../live.js";
import { hrefOf } from "../router.js";
import type {
  RequestEvent,
  RequestHistory,
  RequestPage,
  TimelineEntry,
  Whoami,
} from "../types.js";

interface PageData extends RequestPage {
  readonly seq: number;
}

const STEP_TITLES: Readonly<Record<TimelineEntry["step"], string>> = {
  prepared: "Prepared",
  intent: "Publish intent",
  publication: "Publication",
  answer: "Minion’s answer",
  outcome: "Outcome",
};

const STATUS_TEXT: Readonly<Record<TimelineEntry["status"], string>> = {
  done: "done",
  pending: "not yet",
  skipped: "not needed",
  uncertain: "uncertain",
};

function Timeline({ entries }: { readonly entries: readonly TimelineEntry[] }) {
  return (
    <ol class="timeline" data-testid="timeline">
      {entries.map((entry) => (
        <li
          key={entry.step}
          class={`step step-${entry.status}`}
          data-step={entry.step}
        >
          <div class="step-head">
            <span class="step-title">{STEP_TITLES[entry.step]}</span>
            <span class={`step-status step-status-${entry.status}`}>
              {STATUS_TEXT[entry.status]}
            </span>
            {entry.at === null ? (
              entry.status === "done" || entry.status === "uncertain" ? (
                <span class="muted">time not kept by the record</span>
              ) : null
            ) : (
              <Time at={entry.at} />
            )}
          </div>
          <p class="step-summary">{entry.summary}</p>
          <p class="step-source" data-evidence={entry.evidence}>
            <span class="visually-hidden">Evidence: </span>
            {entry.source}
          </p>
        </li>
      ))}
    </ol>
  );
}

function HistoryTable({ history }: { readonly history: RequestHistory }) {
  return (
    <>
      {history.dropped > 0 ? (
        <p class="note" data-testid="history-dropped">
          {history.dropped} changes between the first and the last ones were let
          go (the history keeps the first 16 and the last 48).
        </p>
      ) : null}
      <table data-testid="history">
        <caption>
          Every committed change of this request, oldest first, with the part of
          the master that committed it.
        </caption>
        <thead>
          <tr>
            <th scope="col">#</th>
            <th scope="col">Time</th>
            <th scope="col">Change</th>
            <th scope="col">Event</th>
            <th scope="col">Source</th>
            <th scope="col">Observed</th>
            <th scope="col">Reason</th>
          </tr>
        </thead>
        <tbody>
          {history.entries.map((e) => (
            <tr key={e.seq} data-seq={e.seq}>
              <td>{e.seq}</td>
              <td>
                <Time at={e.at} />
              </td>
              <td>
                {e.from_state === null ? "created" : e.from_state} →{" "}
                {e.to_state}
              </td>
              <td>
                <Mono>{e.event}</Mono>
              </td>
              <td>{e.source}</td>
              <td>{e.observed ?? <span class="muted">-</span>}</td>
              <td>
                {e.reason_code === null ? (
                  <span class="muted">-</span>
                ) : (
                  <Mono>{e.reason_code}</Mono>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function ReconcileForm({
  requestId,
  me,
  onDone,
}: {
  readonly requestId: string;
  readonly me: Whoami;
  readonly onDone: (page: RequestPage) => void;
}) {
  const [reason, setReason] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  if (!me.scopes.includes("reconcile")) {
    return (
      <p data-testid="reconcile-needs-scope">
        Reconciling needs a token with the <Mono>reconcile</Mono> scope; this
        one ({me.token_id}) has {me.scopes.join(", ")}.
      </p>
    );
  }
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    const text = reason.trim();
    if (text === "") {
      setError(
        "Give a reason: it is recorded with your name and the time, and it is what the next operator reads."
      );
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await api(`/v1/requests/${encodeURIComponent(requestId)}/reconcile`, {
        method: "POST",
        body: { reason: text },
      });
      setReason("");
      onDone(
        await api<RequestPage>(
          `/ui/api/requests/${encodeURIComponent(requestId)}`
        )
      );
    } catch (problem) {
      setError(
        problem instanceof ApiProblem
          ? `${problem.message} (${problem.code})`
          : "The service did not answer; nothing was changed."
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="reconcile" onSubmit={(e) => void submit(e)} noValidate>
      <p>
        Reconciling records your decision and unblocks the target. It never
        publishes anything: check the target first (did the state run?), then
        say what you found.
      </p>
      <label for="reconcile-reason">Reason (recorded as {me.actor})</label>
      <textarea
        id="reconcile-reason"
        rows={3}
        maxLength={1000}
        value={reason}
        required
        aria-invalid={error === null ? undefined : "true"}
        aria-describedby={error === null ? undefined : "reconcile-error"}
        onInput={(e) => setReason(e.currentTarget.value)}
      />
      {error === null ? null : (
        <p id="reconcile-error" class="problem" role="alert">
          {error}
        </p>
      )}
      <button type="submit" disabled={busy}>
        Reconcile this request
      </button>
    </form>
  );
}

export function RequestView({
  id,
  me,
  setStatus,
}: {
  readonly id: string;
  readonly me: Whoami;
  readonly setStatus: (status: LiveStatus) => void;
}) {
  const [override, setOverride] = useState<RequestPage | null>(null);
  const apply: Apply<PageData> = (event, data, current) => {
    if (event !== "request") return current;
    const change = data as RequestEvent;
    return change.page.record.request_id === id
      ? { ...change.page, seq: change.seq }
      : current;
  };
  const loaded = useLiveResource<PageData>(
    `/ui/api/requests/${encodeURIComponent(id)}`,
    "/v1/events",
    apply,
    setStatus
  );
  if (loaded.state === "loading")
    return <p aria-busy="true">Loading the request…</p>;
  if (loaded.state === "failed")
    return <ProblemNote problem={loaded.problem} />;
  // A reconciliation answered here is shown at once, even before its event arrives.
  const page =
    override !== null &&
    override.record.updated_at !== undefined &&
    (loaded.value.record.updated_at ?? "") < override.record.updated_at
      ? override
      : loaded.value;
  const r = page.record;
  return (
    <>
      <h1>
        Request <Mono>{r.request_id}</Mono>
      </h1>
      <dl class="facts" data-testid="facts">
        <dt>State</dt>
        <dd>
          <StateBadge state={r.state} />{" "}
          {page.blocking ? (
            <span class="attention-text">blocks its target</span>
          ) : null}
        </dd>
        <dt>Target</dt>
        <dd>
          {r.minion_id === null ? (
            <span class="muted">names no target (blocks every target)</span>
          ) : (
            <a href={hrefOf.target(r.minion_id)}>
              <Mono>{r.minion_id}</Mono>
            </a>
          )}
        </dd>
        <dt>JID</dt>
        <dd>
          {r.jid === null ? (
            <span class="muted">none</span>
          ) : (
            <Mono>{r.jid}</Mono>
          )}
        </dd>
        {r.protocol === 1 ? (
          <>
            <dt>Profile</dt>
            <dd>
              {r.profile} (role <Mono>{r.role}</Mono>)
            </dd>
            <dt>State digest</dt>
            <dd>
              {r.state_digest === "" ? (
                <span class="muted">none (a fixed role)</span>
              ) : (
                <Mono>{r.state_digest}</Mono>
              )}
            </dd>
            <dt>Publish attempts</dt>
            <dd>{r.publish_attempts}</dd>
            <dt>States passed</dt>
            <dd>
              {r.passed} of {r.total}
            </dd>
          </>
        ) : (
          <>
            <dt>Recorded state</dt>
            <dd>
              {r.recorded_state ?? <span class="muted">not a plain word</span>}{" "}
              (a record from before protocol 1; its other fields are not shown)
            </dd>
          </>
        )}
      </dl>
      {r.profile === "custom" ? (
        <p class="note">
          A custom request: its high data is bound by the digest above and never
          stored or shown.
        </p>
      ) : null}
      {r.protocol === 1 ? (
        <Section title="Timeline" id="timeline-title">
          <p class="note">
            {page.history.kept
              ? "From the request’s history: each step shows when it was committed and which part of the master saw it."
              : "From the record (it predates request histories): each step shows the time the record proves, or says the record did not keep it (a later write replaced it)."}
          </p>
          <Timeline entries={page.timeline} />
        </Section>
      ) : null}
      {page.history.kept ? (
        <Section title="History" id="history-title">
          <HistoryTable history={page.history} />
        </Section>
      ) : null}
      <Section
        title={
          page.receipt?.kind === "status_answer"
            ? "The minion’s answer"
            : "Receipt"
        }
        id="receipt-title"
      >
        {page.receipt === null ? (
          <p>
            No receipt yet: the minion has not reported a terminal result for
            this request.
          </p>
        ) : (
          <>
            <p class="note">
              {page.receipt.kind === "receipt"
                ? "The exact receipt (canonical JSON) the minion committed before it returned, bound to this request, JID, profile and digest."
                : "The minion answered unknown: it holds a claim for this publication without a terminal receipt, so the state may have run."}
            </p>
            <pre
              class="receipt"
              data-testid="receipt"
              tabIndex={0}
              aria-label="canonical receipt JSON"
            >
              {page.receipt.canonical}
            </pre>
          </>
        )}
      </Section>
      {r.reconciliation !== null ? (
        <Section title="Reconciliation" id="reconciliation-title">
          <p data-testid="reconciliation">
            {r.reconciliation.actor} at <Time at={r.reconciliation.at} />: “
            {r.reconciliation.reason}”
          </p>
        </Section>
      ) : page.reconcilable ? (
        <Section title="Reconcile" id="reconcile-title">
          <ReconcileForm
            requestId={r.request_id}
            me={me}
            onDone={setOverride}
          />
        </Section>
      ) : null}
    </>
  );
}
