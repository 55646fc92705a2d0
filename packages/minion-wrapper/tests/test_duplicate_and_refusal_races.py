"""Two races the model check found (packages/test-harness/src/model), with real processes.

1. Salt may deliver a publication twice. A duplicate that arrives while the
   first delivery holds one of its two locks but not yet the other must not
   record anything: before module 1.1.1 the first delivery took the
   execution lock before the request lock, so its duplicate found the
   execution lock busy, the request lock free and no evidence, and
   committed an ``execution_busy`` refusal for its own request; the first
   delivery then found that refusal and never ran.
2. ``status`` between a refusal's two writes (JID index written, refusal
   record not yet) finds an index alone under a busy request lock. Before
   module 1.1.1 it answered ``running``; the ``refused`` that followed made
   the master quarantine a request that never ran.

The module imported by path; forked workers and pollers, real flocks, each
paused at the exact point of the race through a pipe.
"""

import contextlib
import fcntl
import os

from conftest import collect, fork_and_run, marker_count, new_jid, new_uuid


def run(m, request_id, jid):
    return m.run(request_id, "configure", "", **m.publication("oduflow_job.run", [request_id, "configure", ""], jid))


def status(m, request_id, jid):
    args = [request_id, jid, "configure", ""]
    return m.status(*args, **m.publication("oduflow_job.status", args, new_jid()))


def answer(m, request_id, jid, state, passed=0, total=0, **extra):
    return {
        "protocol": 1,
        "minion_id": m.__opts__["id"],
        "request_id": request_id,
        "jid": jid,
        "profile": "configure",
        "state_digest": "",
        "status": state,
        "passed": passed,
        "total": total,
        **extra,
    }


def test_a_duplicate_delivered_while_the_first_holds_only_one_of_its_locks_never_refuses_it(loaded_module):
    m = loaded_module
    run(m, new_uuid(), new_jid())  # creates the store and warms up the imports the forks share
    request_id, jid = new_uuid(), new_jid()
    # The duplicate gives up on the held request lock after a few tries (two
    # seconds in production): the first delivery holds it until the duplicate ended.
    m._REFUSAL_LOCK_ATTEMPTS = 3
    held_read, held_write = os.pipe()
    go_read, go_write = os.pipe()

    def first_delivery():
        # Pause before the second lock this delivery takes, whichever it is:
        # the request lock after the execution lock (1.1.0), or the execution
        # lock after the request lock (1.1.1).
        original_lock = m._Store.lock
        taken = []

        def lock(store, name, blocking):
            if taken:
                os.write(held_write, b"x")
                os.read(go_read, 1)
            fd = original_lock(store, name, blocking)
            taken.append(name)
            return fd

        m._Store.lock = lock
        return run(m, request_id, jid)

    first = fork_and_run(first_delivery)
    os.close(held_write)
    os.close(go_read)
    assert os.read(held_read, 1) == b"x", "the first delivery never took its first lock"
    # The same publication, delivered again by Salt, runs to its end meanwhile.
    duplicate_status, duplicate = collect(*fork_and_run(lambda: run(m, request_id, jid)))
    os.write(go_write, b"x")
    first_status, receipt = collect(*first)
    os.close(held_read)
    os.close(go_write)
    assert os.WIFEXITED(duplicate_status) and os.WIFEXITED(first_status)
    # The duplicate is a plain error and recorded nothing; the first delivery applied.
    assert duplicate.get("error") == "execution_busy" and "status" not in duplicate, duplicate
    assert receipt == answer(m, request_id, jid, "succeeded", 2, 2)
    assert marker_count(m.marker) == 2  # the warm-up run and this one
    assert status(m, request_id, jid) == receipt


def test_status_between_a_refusals_two_writes_answers_the_refusal_not_running(loaded_module):
    m = loaded_module
    run(m, new_uuid(), new_jid())  # creates the store
    request_id, jid = new_uuid(), new_jid()
    indexed_read, indexed_write = os.pipe()
    go_read, go_write = os.pipe()

    def refuser():
        m.__opts__["cache_jobs"] = True  # not ready: a refusal for good
        original_write = m._Store.write

        def write(store, subdir, name, value, owner):
            if subdir == "requests":
                # The JID index is committed, the refusal record is not: pause here.
                os.write(indexed_write, b"x")
                os.read(go_read, 1)
            return original_write(store, subdir, name, value, owner)

        m._Store.write = write
        return run(m, request_id, jid)

    refusing = fork_and_run(refuser)
    os.close(indexed_write)
    os.close(go_read)
    assert os.read(indexed_read, 1) == b"x", "the refuser never wrote its JID index"
    probed_read, probed_write = os.pipe()

    def poller():
        # A bound no loaded machine outlasts: this test is about what status
        # waits for, not how long (module 1.1.0 has no such constant).
        m.STATUS_REFUSAL_WAIT_SECONDS = 20.0
        original_probe = m._Store.probe_lock

        @contextlib.contextmanager
        def probe_lock(store, name):
            with original_probe(store, name) as busy:
                if busy:
                    os.write(probed_write, b"x")  # the refuser's lock is seen busy at least once
                yield busy

        m._Store.probe_lock = probe_lock
        return status(m, request_id, jid)

    polling = fork_and_run(poller)
    os.close(probed_write)
    assert os.read(probed_read, 1) == b"x", "status never found the request lock busy"
    # Only now does the refuser commit its record and release the lock.
    os.write(go_write, b"x")
    refuser_status, refusal = collect(*refusing)
    poller_status, answered = collect(*polling)
    for fd in (indexed_read, go_write, probed_read):
        os.close(fd)
    assert os.WIFEXITED(refuser_status) and os.WIFEXITED(poller_status)
    expected = answer(m, request_id, jid, "refused", reason="not_ready")
    assert refusal == expected
    assert answered == expected
    assert marker_count(m.marker) == 1  # only the first, unrelated run


class Died(BaseException):
    """The worker vanishing at a crash point (not caught by the module)."""


def test_status_waits_for_an_index_alone_only_within_its_bound_then_answers_running(loaded_module):
    """A lock that stays busy past the bound is a living worker: running, never a hang, never unknown."""
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()

    def die_after_the_index(name):
        if name == "M2":
            raise Died(name)

    m._crash_point = die_after_the_index
    with contextlib.suppress(Died):
        run(m, request_id, jid)
    m._crash_point = lambda name: None
    m.STATUS_REFUSAL_WAIT_SECONDS = 0.05
    fd = os.open(m.store_root / "locks" / f"{request_id}.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a worker between its first two writes, for longer than the bound
        assert status(m, request_id, jid) == answer(m, request_id, jid, "running")
    finally:
        os.close(fd)
    assert status(m, request_id, jid) == answer(m, request_id, jid, "unknown")
