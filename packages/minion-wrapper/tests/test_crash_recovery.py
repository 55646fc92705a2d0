"""Real interruptions: forked job workers killed by SIGKILL at every durable boundary.

Each worker is a fork of an in-process minion (Salt's real loader, real
state.sls), exactly as a ``multiprocessing: True`` minion forks one process
per job. A side-effect marker file gets one line per real execution of the
role. After each kill, ``oduflow_job.status`` must give the outcome of
DESIGN section 6, and a repeated publication must never run the role again.

M1, M2, M3, M5 and M6 are the module's ``_crash_point`` seams, replaced in
the child only; M4 ("during the state") is a SIGKILL sent from outside while
the role blocks, after its first state has run. R1 (refusal decided, nothing
written) and R2 (refusal record committed, not returned) are the seams of a
refusal, here one for a publication that carries an executor option.
"""

import contextlib
import os
import signal

import pytest

from conftest import (
    SaltMinionEnv,
    answer_for,
    collect,
    fork_and_run,
    killed_by_sigkill,
    marker_count,
    new_jid,
    new_uuid,
    wait_for,
)

REPEATS = 3


@pytest.fixture(scope="module")
def minion(tmp_path_factory):
    return SaltMinionEnv(tmp_path_factory.mktemp("crash-minion"))


@pytest.fixture
def case(minion, tmp_path):
    minion.use_store(tmp_path / "store")

    class Case:
        store = tmp_path / "store"
        marker = tmp_path / "marker"
        release = tmp_path / "release"

    minion.write_role(
        "roles.client_stack",
        f"""
count-the-run:
  cmd.run:
    - name: echo ran >> {Case.marker}
second-state:
  test.succeed_without_changes: []
""",
    )
    minion.write_role(
        "roles.client_production",
        f"""
count-the-run:
  cmd.run:
    - name: echo ran >> {Case.marker}
block-until-released:
  cmd.run:
    - name: while [ ! -e {Case.release} ]; do sleep 0.02; done
""",
    )
    yield Case
    # Lets an orphaned blocking shell of a killed worker finish.
    Case.release.touch()


def kill_worker_at(minion, point, request_id, jid, load=None):
    """Fork a job worker for the publication and SIGKILL it at ``point``."""

    def worker():
        def crash_point(name):
            if name == point:
                os.kill(os.getpid(), signal.SIGKILL)

        minion.globals["_crash_point"] = crash_point
        return minion.publish("oduflow_job.run", [request_id, "configure", ""], jid, load=load)

    wait_status, result = collect(*fork_and_run(worker))
    assert killed_by_sigkill(wait_status) and result is None


def start_worker(minion, request_id, jid, profile="production"):
    return fork_and_run(lambda: minion.run(request_id, profile, jid=jid))


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_before_the_jid_index_leaves_not_started_and_nothing_ran(minion, case, attempt):
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "M1", request_id, jid)
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "not_started"), 0)
    assert marker_count(case.marker) == 0
    assert not (case.store / "jids" / f"{jid}.json").exists()


@pytest.mark.parametrize("attempt", range(REPEATS))
@pytest.mark.parametrize("point", ["M2", "M3"])
def test_a_worker_killed_inside_the_claim_leaves_unknown_and_never_runs_the_publication(minion, case, point, attempt):
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, point, request_id, jid)
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "unknown"), 0)
    answer, retcode = minion.run(request_id, "configure", jid=jid)
    assert answer["error"] == "already_claimed" and retcode == 1
    assert marker_count(case.marker) == 0
    assert minion.status(request_id, jid, "configure")[0]["status"] == "unknown"


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_during_the_state_leaves_unknown_with_at_most_one_execution(minion, case, attempt):
    request_id, jid = new_uuid(), new_jid()
    pid, result_fd = start_worker(minion, request_id, jid)
    wait_for(lambda: marker_count(case.marker) == 1, what="the role to start")
    os.kill(pid, signal.SIGKILL)
    wait_status, result = collect(pid, result_fd)
    assert killed_by_sigkill(wait_status) and result is None
    assert minion.status(request_id, jid, "production") == (
        answer_for(minion, request_id, jid, "unknown", profile="production"),
        0,
    )
    case.release.touch()
    answer, _ = minion.run(request_id, "production", jid=jid)
    assert answer["error"] == "already_claimed"
    assert marker_count(case.marker) == 1


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_after_the_state_before_the_receipt_leaves_unknown(minion, case, attempt):
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "M5", request_id, jid)
    assert marker_count(case.marker) == 1
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "unknown"), 0)
    assert minion.run(request_id, "configure", jid=jid)[0]["error"] == "already_claimed"
    assert marker_count(case.marker) == 1


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_after_the_receipt_commit_leaves_the_exact_receipt(minion, case, attempt):
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "M6", request_id, jid)
    expected = answer_for(minion, request_id, jid, "succeeded", 2, 2)
    assert minion.status(request_id, jid, "configure") == (expected, 0)
    assert minion.run(request_id, "configure", jid=jid) == (expected, 0)
    assert marker_count(case.marker) == 1


def test_a_lost_publication_is_recovered_exactly_from_the_committed_receipt(minion, case):
    request_id, jid = new_uuid(), new_jid()

    def worker_whose_return_is_lost():
        minion.run(request_id, "configure", jid=jid)  # its return never reaches the master

    wait_status, _ = collect(*fork_and_run(worker_whose_return_is_lost))
    assert os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == 0
    recovered, retcode = minion.status(request_id, jid, "configure")
    assert retcode == 0
    assert recovered == answer_for(minion, request_id, jid, "succeeded", 2, 2)
    assert minion.globals["_validate_receipt"](recovered, {"jid": jid, "request_id": request_id}) == recovered
    assert marker_count(case.marker) == 1


def test_a_duplicate_worker_and_concurrent_polls_during_a_run_see_it_running(minion, case):
    request_id, jid = new_uuid(), new_jid()
    pid, result_fd = start_worker(minion, request_id, jid)
    wait_for(lambda: marker_count(case.marker) == 1, what="the role to start")
    running = answer_for(minion, request_id, jid, "running", profile="production")

    pollers = [fork_and_run(lambda: minion.status(request_id, jid, "production")) for _ in range(3)]
    duplicate = start_worker(minion, request_id, jid)
    assert minion.status(request_id, jid, "production") == (running, 0)
    assert [collect(*poller)[1] for poller in pollers] == [[running, 0]] * 3
    duplicate_status, duplicate_answer = collect(*duplicate)
    assert os.WIFEXITED(duplicate_status)
    assert duplicate_answer[0]["error"] == "execution_busy" and duplicate_answer[1] == 1
    assert marker_count(case.marker) == 1

    case.release.touch()
    wait_status, (answer, retcode) = collect(pid, result_fd)
    assert os.WIFEXITED(wait_status)
    assert answer == answer_for(minion, request_id, jid, "succeeded", 2, 2, "production") and retcode == 0
    assert minion.status(request_id, jid, "production") == (answer, 0)
    assert marker_count(case.marker) == 1


def refused(minion, request_id, jid, reason):
    return {**answer_for(minion, request_id, jid, "refused"), "reason": reason}


def test_another_request_is_refused_for_good_while_a_managed_apply_runs(minion, case):
    request_id, jid = new_uuid(), new_jid()
    pid, result_fd = start_worker(minion, request_id, jid)
    wait_for(lambda: marker_count(case.marker) == 1, what="the role to start")
    other_request, other_jid = new_uuid(), new_jid()
    answer, retcode = minion.run(other_request, "configure", jid=other_jid)
    assert (answer, retcode) == (refused(minion, other_request, other_jid, "execution_busy"), 1)
    assert minion.status(other_request, other_jid, "configure") == (answer, 0)
    case.release.touch()
    assert collect(pid, result_fd)[1][0]["status"] == "succeeded"
    # Delivered again once the minion is idle, the same JID is still refused and never runs.
    assert minion.run(other_request, "configure", jid=other_jid) == (answer, 1)
    assert marker_count(case.marker) == 1


OPTION = {"module_executors": ["direct_call"]}


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_after_deciding_a_refusal_before_writing_it_leaves_not_started(minion, case, attempt):
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "R1", request_id, jid, load=OPTION)
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "not_started"), 0)
    assert not (case.store / "jids" / f"{jid}.json").exists()
    assert marker_count(case.marker) == 0


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_after_committing_a_refusal_leaves_it_for_status_to_recover(minion, case, attempt):
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "R2", request_id, jid, load=OPTION)
    expected = refused(minion, request_id, jid, "forbidden_option")
    assert minion.status(request_id, jid, "configure") == (expected, 0)
    # A plain delivery of that JID now is refused the same way: it never runs.
    assert minion.run(request_id, "configure", jid=jid) == (expected, 1)
    assert marker_count(case.marker) == 0


def test_a_worker_killed_between_a_refusal_index_and_its_record_leaves_unknown(minion, case):
    """The refusal's two writes are a claim's: an index alone is an abandoned claim, never executed."""
    request_id, jid = new_uuid(), new_jid()

    def worker():
        store_class = minion.globals["_Store"]
        original_write = store_class.write

        def write(self, subdir, name, value, owner):
            if subdir == "requests":
                os.kill(os.getpid(), signal.SIGKILL)
            return original_write(self, subdir, name, value, owner)

        store_class.write = write
        return minion.publish("oduflow_job.run", [request_id, "configure", ""], jid, load=OPTION)

    wait_status, result = collect(*fork_and_run(worker))
    assert killed_by_sigkill(wait_status) and result is None
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "unknown"), 0)
    assert minion.run(request_id, "configure", jid=jid)[0]["error"] == "already_claimed"
    assert marker_count(case.marker) == 0


@pytest.mark.parametrize("attempt", range(REPEATS))
def test_a_worker_killed_while_refusing_a_parallel_role_before_the_record_leaves_not_started(minion, case, attempt):
    minion.write_role(
        "roles.client_stack",
        f"""
count-the-run:
  cmd.run:
    - name: echo ran >> {case.marker}
in-parallel:
  test.succeed_without_changes:
    - parallel: True
""",
    )
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "R1", request_id, jid)
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "not_started"), 0)
    assert marker_count(case.marker) == 0
    request_id, jid = new_uuid(), new_jid()
    kill_worker_at(minion, "R2", request_id, jid)
    assert minion.status(request_id, jid, "configure") == (refused(minion, request_id, jid, "parallel_refused"), 0)
    assert marker_count(case.marker) == 0


def test_a_duplicated_publication_between_the_first_deliverys_two_locks_neither_refuses_nor_runs_twice(minion, case):
    """Salt delivers one publication twice: the twin is a plain error, the first applies once (module 1.1.1)."""
    request_id, jid = new_uuid(), new_jid()
    held_read, held_write = os.pipe()
    go_read, go_write = os.pipe()

    def first_delivery():
        store_class = minion.globals["_Store"]
        original_lock = store_class.lock
        taken = []

        def lock(store, name, blocking):
            if taken:  # one lock held, the second not yet: let the twin run now
                os.write(held_write, b"x")
                os.read(go_read, 1)
            fd = original_lock(store, name, blocking)
            taken.append(name)
            return fd

        store_class.lock = lock
        return minion.run(request_id, "configure", jid=jid)

    def twin():
        minion.globals["_REFUSAL_LOCK_ATTEMPTS"] = 3
        return minion.run(request_id, "configure", jid=jid)

    first = fork_and_run(first_delivery)
    os.close(held_write)
    os.close(go_read)
    assert os.read(held_read, 1) == b"x", "the first delivery never took its first lock"
    twin_status, (twin_answer, twin_retcode) = collect(*fork_and_run(twin))
    os.write(go_write, b"x")
    first_status, (answer, retcode) = collect(*first)
    os.close(held_read)
    os.close(go_write)
    assert os.WIFEXITED(twin_status) and os.WIFEXITED(first_status)
    assert twin_answer.get("error") == "execution_busy" and twin_retcode == 1, twin_answer
    expected = answer_for(minion, request_id, jid, "succeeded", 2, 2)
    assert (answer, retcode) == (expected, 0)
    assert minion.status(request_id, jid, "configure") == (expected, 0)
    assert marker_count(case.marker) == 1


def test_status_asked_between_a_refusals_two_writes_answers_refused_not_running(minion, case):
    """A poll that lands between a refusal's JID index and its record waits for the record (module 1.1.1)."""
    request_id, jid = new_uuid(), new_jid()
    indexed_read, indexed_write = os.pipe()
    go_read, go_write = os.pipe()

    def refuser():
        store_class = minion.globals["_Store"]
        original_write = store_class.write

        def write(store, subdir, name, value, owner):
            if subdir == "requests":  # the JID index is committed, the refusal record is not
                os.write(indexed_write, b"x")
                os.read(go_read, 1)
            return original_write(store, subdir, name, value, owner)

        store_class.write = write
        return minion.publish("oduflow_job.run", [request_id, "configure", ""], jid, load=OPTION)

    refusing = fork_and_run(refuser)
    os.close(indexed_write)
    os.close(go_read)
    assert os.read(indexed_read, 1) == b"x", "the refuser never wrote its JID index"
    probed_read, probed_write = os.pipe()

    def poller():
        minion.globals["STATUS_REFUSAL_WAIT_SECONDS"] = 20.0  # what status waits for, not how long
        store_class = minion.globals["_Store"]
        original_probe = store_class.probe_lock

        @contextlib.contextmanager
        def probe_lock(store, name):
            with original_probe(store, name) as busy:
                if busy:
                    os.write(probed_write, b"x")
                yield busy

        store_class.probe_lock = probe_lock
        return minion.status(request_id, jid, "configure")

    polling = fork_and_run(poller)
    os.close(probed_write)
    assert os.read(probed_read, 1) == b"x", "status never found the request lock busy"
    os.write(go_write, b"x")  # only now is the refusal record written and the lock released
    refuser_status, refusal = collect(*refusing)
    poller_status, answered = collect(*polling)
    for fd in (indexed_read, go_write, probed_read):
        os.close(fd)
    assert os.WIFEXITED(refuser_status) and os.WIFEXITED(poller_status)
    expected = refused(minion, request_id, jid, "forbidden_option")
    assert refusal == [expected, 1]
    assert answered == [expected, 0]
    assert marker_count(case.marker) == 0
