"""run/status against the real store, with fake state functions (module imported by path).

Every refusal branch, the status evidence table, the durable-write sequence
and filesystem attacks on the store. The real Salt state system is exercised
in test_salt_integration.py; real SIGKILLs in test_crash_recovery.py.
"""

import fcntl
import json
import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from conftest import marker_count, new_jid, new_uuid, store_files


class Died(BaseException):
    """Simulates the worker vanishing at a crash point (not caught by the module)."""


def run(m, request_id=None, profile="configure", data="", jid=None, **extra):
    """``run`` as the master's plain publication reaches it, plus ``extra`` keywords."""
    request_id = request_id or new_uuid()
    kwargs = m.publication("oduflow_job.run", [request_id, profile, data], jid or new_jid())
    kwargs.update(extra)
    return m.run(request_id, profile, data, **kwargs)


def status(m, request_id, jid, profile="configure", digest="", **extra):
    kwargs = m.publication("oduflow_job.status", [request_id, jid, profile, digest], new_jid())
    kwargs.update(extra)
    return m.status(request_id, jid, profile, digest, **kwargs)


def refused(m, request_id, jid, reason, profile="configure", digest=""):
    return {**expected_receipt(m, request_id, jid, "refused", 0, 0, profile, digest), "reason": reason}


def assert_only_refusal_on_disk(m, request_id, jid, reason):
    """Exactly the JID index and the refusal record, nothing claimed, no state run."""
    answer = refused(m, request_id, jid, reason)
    index = {k: answer[k] for k in ("protocol", "minion_id", "request_id", "jid", "profile", "state_digest")}
    files = {k: v for k, v in store_files(m.store_root).items() if not k.startswith("locks/")}
    assert files == {
        f"jids/{jid}.json": m._canonical_json(index).encode(),
        f"requests/{request_id}.json": m._canonical_json(answer).encode(),
    }
    assert marker_count(m.marker) == 0


def error(answer):
    assert set(answer) == {"protocol", "error", "message"} and answer["protocol"] == 1
    return answer["error"]


def die_at(m, point):
    def crash_point(name):
        if name == point:
            raise Died(name)

    m._crash_point = crash_point


def expected_receipt(m, request_id, jid, status_="succeeded", passed=2, total=2, profile="configure", digest=""):
    return {
        "protocol": 1,
        "minion_id": m.__opts__["id"],
        "request_id": request_id,
        "jid": jid,
        "profile": profile,
        "state_digest": digest,
        "status": status_,
        "passed": passed,
        "total": total,
    }


# ------------------------------------------------------------ capabilities


def test_capabilities_report_a_ready_minion_with_the_digest_of_the_loaded_file(loaded_module):
    import hashlib

    from conftest import MODULE_PATH

    assert loaded_module.capabilities() == {
        "protocol": 1,
        "module_version": "1.1.1",
        "salt_version": "3006.27",
        "module_sha256": hashlib.sha256(MODULE_PATH.read_bytes()).hexdigest(),
        "ready": True,
        "reasons": [],
    }
    assert loaded_module.__context__["retcode"] == 0


# --------------------------------------------------------------- happy path


def test_a_fixed_role_runs_state_sls_once_with_the_publication_jid_and_fixed_options(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    answer = run(m, request_id, "production", jid=jid)
    assert answer == expected_receipt(m, request_id, jid, profile="production")
    assert m.__context__["retcode"] == 0
    assert m.fake_sls.calls == [
        (
            ("roles.client_production",),
            {"__pub_jid": jid, "test": False, "queue": False, "concurrent": False, "state_events": False},
        )
    ]
    assert marker_count(m.marker) == 1


def test_the_claim_and_the_receipt_are_written_as_the_wire_contract_lays_them_out(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    receipt = run(m, request_id, jid=jid)
    root = m.store_root
    index = {k: receipt[k] for k in ("protocol", "minion_id", "request_id", "jid", "profile", "state_digest")}
    assert json.loads((root / "jids" / f"{jid}.json").read_text()) == index
    assert (root / "requests" / f"{request_id}.json").read_text() == m._canonical_json(receipt)
    assert sorted(p.name for p in (root / "locks").iterdir()) == sorted(["execution.lock", f"{request_id}.lock"])
    for path in [root, *root.iterdir()]:
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    for path in root.glob("*/*"):
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_nlink == 1


def test_missing_store_directories_are_created_private_even_under_a_permissive_umask(loaded_module):
    old = os.umask(0)
    try:
        run(loaded_module)
    finally:
        os.umask(old)
    created = loaded_module.store_root.parent
    assert stat.S_IMODE(created.stat().st_mode) == 0o700


def test_custom_high_data_runs_state_high_and_binds_the_receipt_to_its_digest(loaded_module):
    m = loaded_module
    text = '{"x":{"test.succeed_without_changes":[{"name":"x"}]}}'
    request_id, jid = new_uuid(), new_jid()
    answer = run(m, request_id, "custom", text, jid=jid)
    assert answer == expected_receipt(
        m, request_id, jid, passed=1, total=1, profile="custom", digest=m._state_digest(text)
    )
    assert m.fake_high.calls == [
        (
            ({"x": {"test": [{"name": "x"}, "succeed_without_changes"]}},),
            {"test": False, "queue": False, "concurrent": False, "state_events": False},
        )
    ]
    assert m.fake_sls.calls == []


def test_a_receipt_resets_the_retcode_the_inner_state_call_left_behind(loaded_module):
    m = loaded_module
    m.fake_sls.result = {"a": {"result": True}, "b": {"result": False}}
    m.fake_sls.effect = lambda: m.__context__.update(retcode=2)
    answer = run(m)
    assert (answer["status"], answer["passed"], answer["total"]) == ("failed", 1, 2)
    assert m.__context__["retcode"] == 0


def test_a_state_function_that_raises_leaves_an_unknown_receipt(loaded_module):
    m = loaded_module

    def explode():
        raise ValueError("RAWMARK state crashed")

    m.fake_sls.effect = explode
    request_id, jid = new_uuid(), new_jid()
    assert run(m, request_id, jid=jid) == expected_receipt(m, request_id, jid, "unknown", 0, 0)
    assert b"RAWMARK" not in b"".join(store_files(m.store_root).values())


def test_a_replayed_publication_returns_the_committed_receipt_without_running_again(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    first = run(m, request_id, jid=jid)
    assert run(m, request_id, jid=jid) == first
    assert marker_count(m.marker) == 1


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    "option",
    [
        {"test": True},
        {"test": False},
        {"queue": True},
        {"concurrent": True},
        {"saltenv": "prod"},
        {"pillar": {"x": 1}},
        {"state_events": True},
        {"cache": True},
        {"cache_name": "x"},
        {"__pillar__": {}},
    ],
)
def test_caller_options_are_refused_for_good_with_a_refusal_record_and_no_state_work(loaded_module, option):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    answer = run(m, request_id, jid=jid, **option)
    assert answer == refused(m, request_id, jid, "forbidden_option") and m.__context__["retcode"] == 1
    assert_only_refusal_on_disk(m, request_id, jid, "forbidden_option")
    assert status(m, request_id, jid) == answer


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"request_id": "not-a-uuid"}, "invalid_request_id"),
        ({"profile": "highstate"}, "invalid_profile"),
        ({"data": "{}"}, "invalid_high_data"),
        ({"profile": "custom", "data": '{"a":{"b.c":[{"parallel":true}]}}'}, "forbidden_key"),
        ({"profile": "custom", "data": '{"a": {"b.c": []}}'}, "non_canonical_json"),
        ({"jid": "2026112908230024526"}, "invalid_jid"),
    ],
)
def test_invalid_requests_are_refused_before_anything_is_written(loaded_module, change, code):
    m = loaded_module
    request_id = change.pop("request_id", None)
    answer = run(m, request_id, **change)
    assert error(answer) == code
    assert not m.store_root.exists() and marker_count(m.marker) == 0


def test_a_run_without_publication_metadata_is_refused_without_touching_the_store(loaded_module):
    m = loaded_module
    assert error(m.run(new_uuid(), "configure", "")) == "forbidden_option"
    assert error(m.run(new_uuid(), "configure", "", __pub_jid=new_jid())) == "forbidden_option"
    assert not m.store_root.exists() and marker_count(m.marker) == 0


def test_a_jid_passed_as_a_caller_option_is_refused_under_the_publication_jid(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    kwargs = {**m.publication("oduflow_job.run", [request_id, "configure", ""], jid), "jid": new_jid()}
    answer = m.run(request_id, "configure", "", **kwargs)
    assert answer == refused(m, request_id, jid, "forbidden_option")
    assert_only_refusal_on_disk(m, request_id, jid, "forbidden_option")


@pytest.mark.parametrize("minion", ["minion-1", None, "client-0D6F4B3E-8A1C-4F2E-9B7D-3C5A1E2F4D6B"])
def test_a_minion_whose_own_id_is_not_canonical_refuses_to_run_and_to_answer(loaded_module, minion):
    m = loaded_module
    m.__opts__["id"] = minion
    assert error(run(m)) == "invalid_minion_id"
    assert error(status(m, new_uuid(), new_jid())) == "invalid_minion_id"
    assert not m.store_root.exists()


@pytest.mark.parametrize("opts", [{"multiprocessing": False}, {"multiprocessing": 1}, {"multiprocessing": None}])
def test_run_refuses_without_an_isolated_multiprocessing_worker(loaded_module, opts):
    m = loaded_module
    m.__opts__.update(opts)
    request_id, jid = new_uuid(), new_jid()
    assert run(m, request_id, jid=jid) == refused(m, request_id, jid, "unsupported_runtime")
    assert_only_refusal_on_disk(m, request_id, jid, "unsupported_runtime")


def test_run_refuses_on_any_salt_but_the_pinned_release(loaded_module, monkeypatch):
    import salt.version

    m = loaded_module
    monkeypatch.setattr(salt.version, "__version__", "3006.28")
    request_id, jid = new_uuid(), new_jid()
    assert run(m, request_id, jid=jid) == refused(m, request_id, jid, "unsupported_runtime")
    assert_only_refusal_on_disk(m, request_id, jid, "unsupported_runtime")


def test_a_second_apply_while_the_execution_lock_is_held_is_refused_for_good_without_state_work(loaded_module):
    m = loaded_module
    run(m)  # creates the store
    fd = os.open(m.store_root / "locks" / "execution.lock", os.O_RDWR)
    request_id, jid = new_uuid(), new_jid()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        answer = run(m, request_id, jid=jid)
    finally:
        os.close(fd)
    assert answer == refused(m, request_id, jid, "execution_busy") and m.__context__["retcode"] == 1
    assert marker_count(m.marker) == 1
    # Every later delivery of that JID is refused the same way, even with the lock free.
    assert run(m, request_id, jid=jid) == answer
    assert status(m, request_id, jid) == answer
    assert marker_count(m.marker) == 1


@pytest.mark.parametrize("point", ["M2", "M3", "M5"])
def test_an_abandoned_claim_is_never_executed_again(loaded_module, point):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    die_at(m, point)
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    m._crash_point = lambda name: None
    before = marker_count(m.marker)
    assert error(run(m, request_id, jid=jid)) == "already_claimed"
    assert marker_count(m.marker) == before
    assert status(m, request_id, jid)["status"] == "unknown"


def test_a_jid_already_bound_to_another_request_is_a_conflict(loaded_module):
    m = loaded_module
    jid = new_jid()
    run(m, jid=jid)
    other = new_uuid()
    assert error(run(m, other, jid=jid)) == "binding_conflict"
    assert error(status(m, other, jid)) == "binding_conflict"
    assert marker_count(m.marker) == 1


def test_a_request_is_never_recovered_under_a_new_jid(loaded_module):
    m = loaded_module
    request_id = new_uuid()
    run(m, request_id)
    new = new_jid()
    assert error(run(m, request_id, jid=new)) == "binding_conflict"
    assert error(status(m, request_id, new)) == "binding_conflict"
    assert not (m.store_root / "jids" / f"{new}.json").exists()
    assert marker_count(m.marker) == 1


def test_a_request_is_bound_to_its_profile_and_digest(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    run(m, request_id, jid=jid)
    assert error(status(m, request_id, jid, "production")) == "binding_conflict"
    assert error(status(m, request_id, jid, "custom", "b" * 64)) == "binding_conflict"


def test_a_store_from_another_minion_identity_is_a_conflict(loaded_module, minion_id):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    run(m, request_id, jid=jid)
    m.__opts__["id"] = "client-" + new_uuid()
    assert error(status(m, request_id, jid)) == "binding_conflict"


# --------------------------------------------------------------------- status


def test_status_without_a_store_is_not_started_and_creates_nothing(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    answer = status(m, request_id, jid)
    assert answer == expected_receipt(m, request_id, jid, "not_started", 0, 0)
    assert m.__context__["retcode"] == 0
    assert not m.store_root.parent.exists()


def test_status_with_a_store_but_no_evidence_for_the_request_is_not_started(loaded_module):
    m = loaded_module
    run(m)
    request_id, jid = new_uuid(), new_jid()
    assert status(m, request_id, jid)["status"] == "not_started"


def test_status_returns_the_exact_terminal_receipt(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    receipt = run(m, request_id, jid=jid)
    assert status(m, request_id, jid) == receipt


def test_status_during_the_run_sees_the_living_request_lock_as_running(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    seen = []
    m.fake_sls.effect = lambda: seen.append(status(m, request_id, jid))
    run(m, request_id, jid=jid)
    assert seen == [expected_receipt(m, request_id, jid, "running", 0, 0)]


@pytest.mark.parametrize("point", ["M2", "M3", "M5"])
def test_a_claim_without_a_living_worker_is_unknown(loaded_module, point):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    die_at(m, point)
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    assert status(m, request_id, jid) == expected_receipt(m, request_id, jid, "unknown", 0, 0)


def test_a_death_before_the_jid_index_leaves_not_started(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    die_at(m, "M1")
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    assert status(m, request_id, jid)["status"] == "not_started"


def test_a_jid_index_without_a_locks_directory_is_unknown(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    die_at(m, "M2")
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    locks = m.store_root / "locks"
    for path in locks.iterdir():
        path.unlink()
    locks.rmdir()
    assert status(m, request_id, jid)["status"] == "unknown"


def test_a_jid_index_without_its_lock_file_is_unknown(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    die_at(m, "M2")
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    (m.store_root / "locks" / f"{request_id}.lock").unlink()
    assert status(m, request_id, jid)["status"] == "unknown"


def test_status_refuses_caller_options_and_invalid_arguments(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    assert error(status(m, request_id, jid, test=True)) == "forbidden_option"
    assert not m.store_root.exists()
    assert m.__context__["retcode"] == 1
    assert error(status(m, request_id, jid, "configure", "a" * 64)) == "invalid_state_digest"
    assert error(status(m, request_id, jid, "custom", "")) == "invalid_state_digest"
    assert error(status(m, request_id, "1", "configure")) == "invalid_jid"
    assert error(status(m, "x", jid)) == "invalid_request_id"
    assert error(status(m, request_id, jid, "other")) == "invalid_profile"


# ----------------------------------------------------------- malformed store


def committed(m):
    request_id, jid = new_uuid(), new_jid()
    receipt = run(m, request_id, jid=jid)
    return request_id, jid, receipt


def overwrite(path, text):
    path.write_text(text)
    os.chmod(path, 0o600)


@pytest.mark.parametrize(
    ("target", "content"),
    [
        ("index", "not json"),
        ("index", '{"jid": "x"}'),
        ("index", "{}"),
        ("index", "[]"),
        ("index", "wrong-jid"),
        ("index", "\xff"),
        ("record", "{ }"),
        ("record", "not-started"),
        ("record", "other-request"),
        ("record", "x" * 5000),
    ],
)
def test_a_malformed_store_file_is_an_error_never_not_started(loaded_module, target, content):
    m = loaded_module
    request_id, jid, receipt = committed(m)
    index_path = m.store_root / "jids" / f"{jid}.json"
    record_path = m.store_root / "requests" / f"{request_id}.json"
    if content == "wrong-jid":
        index = json.loads(index_path.read_text())
        index["jid"] = new_jid()
        content = m._canonical_json(index)
    elif content == "not-started":
        content = m._canonical_json({**receipt, "status": "not_started", "passed": 0, "total": 0})
    elif content == "other-request":
        content = m._canonical_json({**receipt, "request_id": new_uuid()})
    elif content == "\xff":
        index_path.write_bytes(b"\xff")
        os.chmod(index_path, 0o600)
        content = None
    if content is not None:
        overwrite(index_path if target == "index" else record_path, content)
    assert error(status(m, request_id, jid)) == "malformed_store"
    assert error(run(m, request_id, jid=jid)) == "malformed_store"


# ------------------------------------------------------------ store attacks


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    return path


def assert_untouched(outside_dir):
    assert list(outside_dir.iterdir()) == []


def test_a_symlinked_store_root_is_refused_and_nothing_is_written_through_it(loaded_module, outside):
    m = loaded_module
    m.store_root.parent.mkdir(parents=True)
    m.store_root.symlink_to(outside)
    assert error(run(m)) == "unsafe_store"
    assert error(status(m, new_uuid(), new_jid())) == "unsafe_store"
    assert_untouched(outside)
    assert marker_count(m.marker) == 0


def test_a_symlinked_ancestor_of_the_store_is_refused(loaded_module, outside):
    m = loaded_module
    m.store_root.parent.symlink_to(outside)
    assert error(run(m)) == "unsafe_store"
    assert_untouched(outside)


@pytest.mark.parametrize("subdir", ["jids", "requests", "locks"])
def test_a_symlinked_store_subdirectory_is_refused(loaded_module, outside, subdir):
    m = loaded_module
    run(m)
    victim = m.store_root / subdir
    for path in victim.iterdir():
        path.unlink()
    victim.rmdir()
    victim.symlink_to(outside)
    assert error(run(m)) == "unsafe_store"
    assert error(status(m, new_uuid(), new_jid())) == "unsafe_store"
    assert_untouched(outside)
    assert marker_count(m.marker) == 1


def test_a_file_where_a_store_directory_belongs_is_refused(loaded_module):
    m = loaded_module
    m.store_root.mkdir(parents=True, mode=0o700)
    (m.store_root / "jids").write_text("")
    assert error(run(m)) == "unsafe_store"


@pytest.mark.parametrize("which", ["index", "record", "lock", "execution"])
def test_a_symlinked_store_file_is_refused(loaded_module, outside, which):
    m = loaded_module
    request_id, jid, _ = committed(m)
    target = outside / "target"
    target.write_text("{}")
    os.chmod(target, 0o600)
    path = {
        "index": m.store_root / "jids" / f"{jid}.json",
        "record": m.store_root / "requests" / f"{request_id}.json",
        "lock": m.store_root / "locks" / f"{request_id}.lock",
        "execution": m.store_root / "locks" / "execution.lock",
    }[which]
    path.unlink()
    path.symlink_to(target)
    if which == "lock":
        # Leave only the claim's JID index, so that status consults the request lock.
        (m.store_root / "requests" / f"{request_id}.json").unlink()
    if which != "execution":
        assert error(status(m, request_id, jid)) == "unsafe_store"
    assert error(run(m, request_id, jid=jid)) == "unsafe_store"
    assert target.read_text() == "{}"
    assert marker_count(m.marker) == 1


@pytest.mark.parametrize("which", ["index", "record", "lock"])
def test_a_hard_linked_store_file_is_refused(loaded_module, outside, which):
    m = loaded_module
    request_id, jid, _ = committed(m)
    path = {
        "index": m.store_root / "jids" / f"{jid}.json",
        "record": m.store_root / "requests" / f"{request_id}.json",
        "lock": m.store_root / "locks" / "execution.lock",
    }[which]
    os.link(path, outside / "second-link")
    assert error(run(m, request_id, jid=jid)) == "unsafe_store"
    if which != "lock":
        assert error(status(m, request_id, jid)) == "unsafe_store"


def test_a_fifo_in_place_of_a_record_is_refused_without_blocking(loaded_module):
    m = loaded_module
    request_id, jid, _ = committed(m)
    record = m.store_root / "requests" / f"{request_id}.json"
    record.unlink()
    os.mkfifo(record, 0o600)
    assert error(status(m, request_id, jid)) == "unsafe_store"


def store_levels(m, request_id, jid):
    root = m.store_root
    return {
        "root": root,
        "jids": root / "jids",
        "requests": root / "requests",
        "locks": root / "locks",
        "index": root / "jids" / f"{jid}.json",
        "record": root / "requests" / f"{request_id}.json",
        "request-lock": root / "locks" / f"{request_id}.lock",
        "execution-lock": root / "locks" / "execution.lock",
    }


LEVELS = ["root", "jids", "requests", "locks", "index", "record", "request-lock", "execution-lock"]


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_level_owned_by_another_user_is_refused(loaded_module, level):
    m = loaded_module
    request_id, jid, _ = committed(m)
    os.chown(store_levels(m, request_id, jid)[level], 65534, 65534)
    assert error(run(m, request_id, jid=jid)) == "unsafe_store"
    assert marker_count(m.marker) == 1


@pytest.mark.parametrize("level", LEVELS)
def test_a_store_level_with_the_wrong_mode_is_refused(loaded_module, level):
    m = loaded_module
    request_id, jid, _ = committed(m)
    path = store_levels(m, request_id, jid)[level]
    os.chmod(path, 0o755 if path.is_dir() else 0o644)
    assert error(run(m, request_id, jid=jid)) == "unsafe_store"
    assert marker_count(m.marker) == 1


@pytest.mark.parametrize("level", ["root", "jids", "requests", "index", "record"])
def test_status_refuses_a_level_with_the_wrong_owner_or_mode(loaded_module, level):
    m = loaded_module
    request_id, jid, _ = committed(m)
    path = store_levels(m, request_id, jid)[level]
    os.chmod(path, 0o750 if path.is_dir() else 0o640)
    assert error(status(m, request_id, jid)) == "unsafe_store"
    os.chmod(path, 0o700 if path.is_dir() else 0o600)
    os.chown(path, 65534, 65534)
    assert error(status(m, request_id, jid)) == "unsafe_store"


def test_a_running_claim_with_an_unsafe_request_lock_is_an_error(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    die_at(m, "M3")
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    os.chmod(m.store_root / "locks" / f"{request_id}.lock", 0o644)
    assert error(status(m, request_id, jid)) == "unsafe_store"


def test_an_ancestor_writable_by_others_is_refused(loaded_module):
    m = loaded_module
    m.store_root.parent.mkdir(parents=True)
    os.chmod(m.store_root.parent, 0o777)
    assert error(run(m)) == "unsafe_store"
    os.chmod(m.store_root.parent, 0o1777)
    assert run(m)["status"] == "succeeded"


def test_an_ancestor_owned_by_another_user_is_refused(loaded_module):
    m = loaded_module
    m.store_root.parent.mkdir(parents=True)
    os.chown(m.store_root.parent, 65534, 65534)
    assert error(run(m)) == "unsafe_store"
    assert error(status(m, new_uuid(), new_jid())) == "unsafe_store"


@pytest.mark.parametrize("root", ["relative/store", "/", "//", 7, "/" + "x" * 300 + "/store"])
def test_a_store_option_that_is_not_a_usable_absolute_path_is_refused(loaded_module, root):
    m = loaded_module
    m.__opts__["oduflow_receipt_dir"] = root
    assert error(run(m)) == "unsafe_store"


def test_the_default_store_is_the_documented_path():
    from conftest import load_module

    m = load_module()
    m.__opts__ = {}
    assert m._store_root() == "/var/lib/oduflow/job-receipts"


def test_a_directory_swapped_for_a_symlink_between_checks_is_refused(loaded_module, outside, monkeypatch):
    m = loaded_module
    run(m)
    real_open = os.open
    requests = m.store_root / "requests"

    def racing_open(path, flags, *args, **kwargs):
        if path == "requests" and kwargs.get("dir_fd") is not None and not requests.is_symlink():
            # An attacker swaps the directory after the root was checked, before it is opened.
            os.rename(requests, m.store_root / "requests.moved")
            requests.symlink_to(outside)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    assert error(run(m)) == "unsafe_store"
    monkeypatch.undo()
    assert_untouched(outside)
    assert marker_count(m.marker) == 1


def test_a_symlink_planted_between_the_missing_check_and_mkdir_is_refused(loaded_module, outside, monkeypatch):
    m = loaded_module
    real_mkdir = os.mkdir

    def racing_mkdir(path, mode=0o777, *, dir_fd=None):
        if path == "store":
            os.symlink(outside, path, dir_fd=dir_fd)
        return real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    assert error(run(m)) == "unsafe_store"
    monkeypatch.undo()
    assert_untouched(outside)


def test_a_directory_created_concurrently_by_the_same_owner_is_used(loaded_module, monkeypatch):
    m = loaded_module
    real_mkdir = os.mkdir

    def racing_mkdir(path, mode=0o777, *, dir_fd=None):
        if path == "store":
            real_mkdir(path, 0o700, dir_fd=dir_fd)
        return real_mkdir(path, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    assert run(m)["status"] == "succeeded"


# -------------------------------------------------------- durable writes


def test_stale_temp_files_from_a_killed_writer_are_removed_under_the_execution_lock(loaded_module):
    m = loaded_module
    run(m)
    stale = [
        m.store_root / "jids" / ".20261129082300245264.json.0123456789abcdef.tmp",
        m.store_root / "requests" / f".{new_uuid()}.json.fedcba9876543210.tmp",
    ]
    keep = m.store_root / "requests" / "unrelated-file"
    for path in [*stale, keep]:
        path.write_text("partial")
    run(m)
    assert not any(path.exists() for path in stale)
    assert keep.exists()


def test_a_failed_write_removes_its_temp_file_and_reports_an_internal_error(loaded_module, monkeypatch, caplog):
    m = loaded_module
    run(m)
    real_fsync = os.fsync

    def failing_fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    jid = new_jid()
    with caplog.at_level(logging.ERROR):
        answer = run(m, jid=jid)
    monkeypatch.undo()
    assert answer == {
        "protocol": 1,
        "error": "internal_error",
        "message": "oduflow_job failed unexpectedly; see the minion log",
    }
    assert m.__context__["retcode"] == 1
    assert "failed unexpectedly" in caplog.text
    assert [p.name for p in (m.store_root / "jids").iterdir() if p.name.endswith(".tmp")] == []
    assert not (m.store_root / "jids" / f"{jid}.json").exists()
    assert marker_count(m.marker) == 1


# ------------------------------------------------------ raw-result shims


def test_the_shims_capture_state_cache_writes_refuse_their_reads_and_are_restored(loaded_module, tmp_path):
    import io

    import salt.state
    import salt.utils.files

    m = loaded_module
    cachedir = Path(m.__opts__["cachedir"])
    originals = (salt.utils.files.fopen, salt.state.State.event, salt.state.State.call_parallel)
    observed = {}

    def inspect():
        fopen = salt.utils.files.fopen
        observed["binary"] = type(fopen(str(cachedir / "sls.p"), "w+b"))
        observed["text"] = type(fopen(str(cachedir / "highstate.cache.p"), mode="w"))
        with pytest.raises(PermissionError):
            fopen(str(cachedir / "sls.p"), "rb")
        with pytest.raises(PermissionError):
            fopen(str(cachedir / "highstate.cache.p"))
        with fopen(str(cachedir / "other.p"), "w") as plain:
            plain.write("ordinary")
        with fopen(tmp_path / "pathlike.txt", "w") as plain:
            plain.write("ordinary")
        observed["event"] = salt.state.State.event(None, {"RAWMARK": 1}, 1, fire_event=True)
        with pytest.raises(RuntimeError):
            salt.state.State.call_parallel(None, {}, {}, None)

    m.fake_sls.effect = inspect
    assert run(m)["status"] == "succeeded"
    assert observed == {"binary": io.BytesIO, "text": io.StringIO, "event": None}
    assert not (cachedir / "sls.p").exists() and not (cachedir / "highstate.cache.p").exists()
    assert (cachedir / "other.p").read_text() == "ordinary"
    assert (salt.utils.files.fopen, salt.state.State.event, salt.state.State.call_parallel) == originals


def test_the_shims_are_restored_when_the_state_function_raises(loaded_module):
    import salt.state
    import salt.utils.files

    m = loaded_module
    originals = (salt.utils.files.fopen, salt.state.State.event, salt.state.State.call_parallel)

    def explode():
        raise KeyError("boom")

    m.fake_sls.effect = explode
    assert run(m)["status"] == "unknown"
    assert (salt.utils.files.fopen, salt.state.State.event, salt.state.State.call_parallel) == originals


def test_a_store_root_without_its_subdirectories_holds_no_evidence(loaded_module):
    m = loaded_module
    m.store_root.mkdir(parents=True, mode=0o700)
    request_id, jid = new_uuid(), new_jid()
    assert status(m, request_id, jid)["status"] == "not_started"
    assert list(m.store_root.iterdir()) == []


# ------------------------------------------------------- refusals, evidence


def test_a_refusal_is_a_plain_error_while_a_worker_of_the_same_request_holds_its_lock(loaded_module, monkeypatch):
    m = loaded_module
    run(m)  # creates the store
    request_id, jid = new_uuid(), new_jid()
    monkeypatch.setattr(m, "_REFUSAL_LOCK_ATTEMPTS", 3)
    fds = [
        os.open(m.store_root / "locks" / name, os.O_RDWR | os.O_CREAT, 0o600)
        for name in ("execution.lock", f"{request_id}.lock")
    ]
    try:
        for fd in fds:
            fcntl.flock(fd, fcntl.LOCK_EX)
        answer = run(m, request_id, jid=jid)
    finally:
        for fd in fds:
            os.close(fd)
    assert error(answer) == "execution_busy"
    assert not (m.store_root / "jids" / f"{jid}.json").exists()
    assert not (m.store_root / "requests" / f"{request_id}.json").exists()


def test_a_refusal_waits_out_a_shared_probe_of_the_request_lock(loaded_module):
    m = loaded_module
    run(m)
    request_id, jid = new_uuid(), new_jid()
    path = m.store_root / "locks" / f"{request_id}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    real_sleep = m.time.sleep

    def release_during_the_first_pause(seconds):
        os.close(fd)  # the probe ends
        m.time.sleep = real_sleep

    m.time.sleep = release_during_the_first_pause
    try:
        answer = run(m, request_id, jid=jid, test=True)
    finally:
        m.time.sleep = real_sleep
    assert answer == refused(m, request_id, jid, "forbidden_option")


def test_a_refusal_is_never_written_over_a_claim_or_a_receipt(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    receipt = run(m, request_id, jid=jid)
    before = store_files(m.store_root)
    # The same publication again, now with an option: it already applied, so the receipt answers.
    assert run(m, request_id, jid=jid, test=True) == receipt
    die_at(m, "M3")
    claimed, claimed_jid = new_uuid(), new_jid()
    with pytest.raises(Died):
        run(m, claimed, jid=claimed_jid)
    m._crash_point = lambda name: None
    assert error(run(m, claimed, jid=claimed_jid, test=True)) == "already_claimed"
    assert status(m, claimed, claimed_jid)["status"] == "unknown"
    assert {k: v for k, v in store_files(m.store_root).items() if k in before} == before


def test_a_run_waits_for_a_status_probe_holding_its_request_lock_and_applies_once(loaded_module):
    # A poll's status probe holds the request lock shared for a few reads; a run arriving
    # then waits for it instead of failing (mutmut: a non-blocking request lock survived).
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    run(m, jid=new_jid())  # the store and its lock directory exist
    lock = m.store_root / "locks" / f"{request_id}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    release = threading.Timer(0.3, os.close, (fd,))
    release.start()
    try:
        receipt = run(m, request_id, jid=jid)
    finally:
        release.join()
    assert receipt["status"] == "succeeded" and receipt["jid"] == jid
    assert marker_count(m.marker) == 2


def test_a_refusal_is_never_written_over_a_jid_index_alone(loaded_module):
    # What a death at M2 leaves: the JID index without its request record. Mutation
    # testing (mutmut) showed the refusal's evidence check could require both.
    m = loaded_module
    die_at(m, "M2")
    request_id, jid = new_uuid(), new_jid()
    with pytest.raises(Died):
        run(m, request_id, jid=jid)
    m._crash_point = lambda name: None
    before = store_files(m.store_root)
    assert error(run(m, request_id, jid=jid, test=True)) == "already_claimed"
    assert status(m, request_id, jid)["status"] == "unknown"
    assert store_files(m.store_root) == before


def test_an_option_with_an_invalid_binding_is_refused_without_a_record(loaded_module):
    m = loaded_module
    assert error(run(m, "not-a-uuid", test=True)) == "forbidden_option"
    assert error(run(m, profile="custom", data="{}", test=True)) == "forbidden_option"
    assert not m.store_root.exists()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("remove-index", "inconsistent_evidence"),
        ("index-other-request", "inconsistent_evidence"),
        ("index-other-profile", "inconsistent_evidence"),
    ],
)
@pytest.mark.parametrize("record", ["receipt", "refusal", "claim"])
def test_a_request_record_without_its_jid_index_is_inconsistent_evidence_never_an_answer(
    loaded_module, change, expected, record
):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    if record == "receipt":
        run(m, request_id, jid=jid)
    elif record == "refusal":
        run(m, request_id, jid=jid, test=True)
    else:
        die_at(m, "M3")
        with pytest.raises(Died):
            run(m, request_id, jid=jid)
        m._crash_point = lambda name: None
    index_path = m.store_root / "jids" / f"{jid}.json"
    index = json.loads(index_path.read_text())
    if change == "remove-index":
        index_path.unlink()
    else:
        index.update({"request_id": new_uuid()} if change == "index-other-request" else {"profile": "production"})
        overwrite(index_path, m._canonical_json(index))
    assert error(status(m, request_id, jid)) == expected
    assert error(run(m, request_id, jid=jid)) == expected
    assert marker_count(m.marker) == (1 if record == "receipt" else 0)


def test_a_jid_index_bound_to_another_request_without_a_record_is_still_a_conflict(loaded_module):
    m = loaded_module
    jid = new_jid()
    run(m, jid=jid)
    assert error(status(m, new_uuid(), jid)) == "binding_conflict"


def test_a_stored_refusal_with_an_unknown_reason_is_malformed(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    answer = run(m, request_id, jid=jid, test=True)
    overwrite(m.store_root / "requests" / f"{request_id}.json", m._canonical_json({**answer, "reason": "bored"}))
    assert error(status(m, request_id, jid)) == "malformed_store"


def test_a_render_error_that_never_reaches_a_chunk_still_claims_before_its_unknown_receipt(loaded_module):
    m = loaded_module
    m.fake_sls.compiles = False
    m.fake_sls.result = ["Rendering SLS failed: RAWMARK"]
    order = []
    m._crash_point = order.append
    request_id, jid = new_uuid(), new_jid()
    assert run(m, request_id, jid=jid) == expected_receipt(m, request_id, jid, "unknown", 0, 0)
    assert order == ["M1", "M2", "M3", "M5", "M6"]


def test_the_claim_happens_in_the_gate_before_the_first_state_runs(loaded_module):
    m = loaded_module
    request_id, jid = new_uuid(), new_jid()
    seen = []
    m.fake_sls.effect = lambda: seen.append(record_on_disk(m, request_id))
    run(m, request_id, jid=jid)
    assert seen == ["running"]


def record_on_disk(m, request_id):
    path = m.store_root / "requests" / f"{request_id}.json"
    return json.loads(path.read_text())["status"] if path.exists() else None


def test_a_parallel_chunk_is_refused_at_the_gate_before_any_state_runs(loaded_module):
    m = loaded_module
    m.fake_sls.chunks = [{"state": "cmd", "fun": "run", "name": "a"}, {"state": "cmd", "fun": "run", "parallel": True}]
    request_id, jid = new_uuid(), new_jid()
    assert run(m, request_id, jid=jid) == refused(m, request_id, jid, "parallel_refused")
    assert_only_refusal_on_disk(m, request_id, jid, "parallel_refused")


def test_a_store_failure_in_the_gate_stops_the_state_and_is_reported(loaded_module, monkeypatch):
    m = loaded_module
    run(m)
    real_fsync = os.fsync

    def failing_fsync(fd):
        if stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    answer = run(m)
    monkeypatch.undo()
    assert error(answer) == "internal_error"
    assert marker_count(m.marker) == 1


# -------------------------------------------------------- temp-file sweep


def test_the_sweep_keeps_a_temp_whose_writer_holds_its_request_lock_and_removes_a_dead_one(loaded_module):
    m = loaded_module
    run(m)
    live, dead = new_uuid(), new_uuid()
    live_temp = m.store_root / "jids" / f".{new_jid()}.json.{live}.0123456789abcdef.tmp"
    dead_temp = m.store_root / "requests" / f".{dead}.json.{dead}.fedcba9876543210.tmp"
    for path in (live_temp, dead_temp):
        path.write_text("partial")
    fd = os.open(m.store_root / "locks" / f"{live}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        run(m)
    finally:
        os.close(fd)
    assert live_temp.exists() and not dead_temp.exists()


def test_a_temp_file_names_the_request_whose_lock_its_writer_holds(loaded_module, monkeypatch):
    m = loaded_module
    names = []
    real_open = os.open

    def recording_open(path, flags, *args, **kwargs):
        if isinstance(path, str) and path.endswith(".tmp"):
            names.append(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    request_id = new_uuid()
    run(m, request_id)
    monkeypatch.undo()
    assert len(names) == 3
    assert all(m._TEMP_RE.fullmatch(name).group(1) == request_id for name in names)


# ---------------------------------------------------- the module as Salt sees it


def test_virtual_refuses_off_linux_with_a_reason(loaded_module, monkeypatch):
    m = loaded_module
    monkeypatch.setattr(m.sys, "platform", "darwin")
    loaded, reason = m.__virtual__()
    assert loaded is False and "Linux" in reason


def test_virtual_refuses_a_salt_outside_the_3006_line(loaded_module, monkeypatch):
    import salt.version

    m = loaded_module
    monkeypatch.setattr(salt.version, "__version__", "3007.1")
    assert m.__virtual__()[0] is False
    monkeypatch.setattr(salt.version, "__version__", "3006.9")
    assert m.__virtual__() == "oduflow_job"


def test_every_error_code_the_module_can_answer_is_a_protocol_error_code(loaded_module):
    """The module's codes must all be in @oduflow/protocol's PROTOCOL_ERROR_CODES (h2 holds the TS side to this)."""
    import re as regex

    from conftest import MODULE_PATH

    errors_ts = (MODULE_PATH.parents[3] / "protocol" / "src" / "errors.ts").read_text()
    listed = regex.search(r"PROTOCOL_ERROR_CODES = \[(.*?)\] as const", errors_ts, regex.S).group(1)
    protocol_codes = set(regex.findall(r"'([a-z_]+)'", listed)) | {
        "not_ready",
        "parallel_refused",
        "inconsistent_evidence",
    }
    source = MODULE_PATH.read_text()
    raised = set(regex.findall(r'ProtocolError\(\s*"([a-z_]+)"', source))
    raised |= {"unsafe_store", "malformed_store", "internal_error"}  # via _unsafe, _malformed and _answer
    raised |= set(loaded_module.REFUSAL_REASONS)  # a refusal without a record is an error with its reason
    assert raised <= protocol_codes, sorted(raised - protocol_codes)
