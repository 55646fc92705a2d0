"""status racing a worker that commits its receipt: never a false ``unknown``.

The master treats ``unknown`` as settled, so a status that read the running
claim, then found the request lock free because the worker committed and
released in between, must not answer ``unknown``. The module imported by
path; real forked workers and pollers, real flocks.
"""

import contextlib
import fcntl
import os
import re
import time

from conftest import collect, fork_and_run, new_jid, new_uuid, wait_for


def run(m, request_id, jid):
    return m.run(request_id, "configure", "", **m.publication("oduflow_job.run", [request_id, "configure", ""], jid))


def status(m, request_id, jid):
    args = [request_id, jid, "configure", ""]
    return m.status(*args, **m.publication("oduflow_job.status", args, new_jid()))


def record_status(m, request_id):
    path = m.store_root / "requests" / f"{request_id}.json"
    try:
        return m._parse_canonical_json(path.read_text())["status"]
    except FileNotFoundError:
        return None


def start_blocked_worker(m, request_id, jid):
    """A forked worker whose state blocks until a byte arrives on the returned write end."""
    go_read, go_write = os.pipe()
    m.fake_sls.effect = lambda: os.read(go_read, 1)
    worker = fork_and_run(lambda: run(m, request_id, jid))
    os.close(go_read)
    wait_for(lambda: record_status(m, request_id) == "running", what="the worker's claim")
    return worker, go_write


def test_a_receipt_committed_between_the_evidence_read_and_the_lock_probe_is_answered(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    worker, go = start_blocked_worker(m, request_id, jid)
    original = m._read_evidence
    seen = []

    def read_then_let_the_worker_commit_and_exit(store, binding):
        index, record = original(store, binding)
        seen.append(record["status"])
        if len(seen) == 1:
            # The claim is read; the worker now commits, releases its lock and exits.
            os.write(go, b"x")
            seen.append(collect(*worker))
        return index, record

    m._read_evidence = read_then_let_the_worker_commit_and_exit
    answer = status(m, request_id, jid)
    wait_status, worker_receipt = seen[1]
    assert os.WIFEXITED(wait_status) and worker_receipt["status"] == "succeeded"
    assert seen[0] == "running" and seen[2] == "succeeded"
    assert answer == worker_receipt


def test_a_record_replaced_by_the_commit_while_status_reads_it_is_read_again(loaded_module, monkeypatch):
    """An opened claim that the receipt's rename replaced has no link left: not an unsafe store."""
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    receipt = run(m, request_id, jid)
    path = m.store_root / "requests" / f"{request_id}.json"
    real_fstat = os.fstat
    replaced = []

    def fstat_after_a_concurrent_commit(fd):
        info = real_fstat(fd)
        if not replaced and info.st_ino == os.stat(path).st_ino:
            copy = path.with_name(".replacement")
            copy.write_bytes(path.read_bytes())
            os.chmod(copy, 0o600)
            os.rename(copy, path)
            replaced.append(real_fstat(fd).st_nlink)
            info = real_fstat(fd)
        return info

    monkeypatch.setattr(os, "fstat", fstat_after_a_concurrent_commit)
    assert status(m, request_id, jid) == receipt
    assert replaced == [0]


class Died(BaseException):
    """The worker vanishing at a crash point (not caught by the module)."""


def test_the_evidence_is_re_read_while_status_holds_the_request_lock(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()

    def die_after_the_claim(name):
        if name == "M3":
            raise Died(name)

    m._crash_point = die_after_the_claim
    with contextlib.suppress(Died):
        run(m, request_id, jid)
    original = m._read_evidence
    calls = []

    def note_whether_a_worker_could_take_the_lock(store, binding):
        fd = os.open(m.store_root / "locks" / f"{request_id}.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            calls.append("held by status")
        else:
            calls.append("free")
        finally:
            os.close(fd)
        return original(store, binding)

    m._read_evidence = note_whether_a_worker_could_take_the_lock
    assert status(m, request_id, jid)["status"] == "unknown"
    assert calls == ["free", "held by status"]


POLLERS = 4
ROUNDS = 15
# One poller's view of one request: nothing yet, then running, then the receipt.
MONOTONE = re.compile(r"(not_started,)*(running,)*(succeeded,)+")


def _poll_until_terminal(m, request_id, jid):
    seen = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        answer = status(m, request_id, jid)
        seen.append(answer.get("status", answer.get("error", "") + ":" + answer.get("message", "")))
        if seen[-1] in ("succeeded", "failed", "unknown") or "error" in answer:
            # A few more polls after the first terminal answer: they must agree.
            for _ in range(5):
                later = status(m, request_id, jid)
                seen.append(later.get("status", later.get("error")))
            break
    return seen


def test_polls_racing_many_completing_workers_never_answer_unknown(loaded_module):
    m = loaded_module
    # Warm up in this process (Salt imports inside the worker's shims), so the
    # forked workers only do the work under test.
    assert run(m, new_uuid(), new_jid())["status"] == "succeeded"
    histories = []
    for round_number in range(ROUNDS):
        request_id, jid = new_uuid(), new_jid()
        go_read, go_write = os.pipe()
        m.fake_sls.effect = lambda go_read=go_read: os.read(go_read, 1)
        worker = fork_and_run(lambda request_id=request_id, jid=jid: run(m, request_id, jid))
        os.close(go_read)
        wait_for(lambda request_id=request_id: record_status(m, request_id) == "running", what="the worker's claim")
        pollers = [
            fork_and_run(lambda request_id=request_id, jid=jid: _poll_until_terminal(m, request_id, jid))
            for _ in range(POLLERS)
        ]
        # Let the pollers spin on the running claim, then let the worker commit under them.
        time.sleep(0.001 * (round_number % 4))
        os.write(go_write, b"x")
        os.close(go_write)
        wait_status, receipt = collect(*worker)
        assert os.WIFEXITED(wait_status) and receipt["status"] == "succeeded"
        for poller in pollers:
            poller_status, seen = collect(*poller)
            assert os.WIFEXITED(poller_status) and os.WEXITSTATUS(poller_status) == 0
            histories.append(seen)
    assert not [seen for seen in histories if "unknown" in seen]
    odd = [seen for seen in histories if not MONOTONE.fullmatch("".join(s + "," for s in seen))]
    assert not odd, [sorted(set(seen)) for seen in odd]
