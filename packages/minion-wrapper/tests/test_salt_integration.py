"""oduflow_job through Salt 3006.27's real loader and state system.

One in-process minion (salt.client.Caller on a temporary config) serves the
whole module; every test gets its own store and side-effect marker. Functions
are invoked as a job worker invokes them, so Salt itself injects ``__pub_*``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (
    PILLAR_SECRET,
    SaltMinionEnv,
    answer_for,
    marker_count,
    new_jid,
    new_uuid,
    store_files,
)

RAW_MARKERS = ("RAWMARK", PILLAR_SECRET)


@pytest.fixture(scope="module")
def minion(tmp_path_factory):
    return SaltMinionEnv(tmp_path_factory.mktemp("minion"))


@pytest.fixture
def case(minion, tmp_path):
    """A fresh store and marker for one test; roles are rewritten per test."""
    store = tmp_path / "store"
    minion.use_store(store)
    for name in ("sls.p", "highstate.cache.p"):
        (minion.cachedir / name).unlink(missing_ok=True)

    class Case:
        pass

    c = Case()
    c.store = store
    c.marker = tmp_path / "marker"
    c.work = tmp_path / "work"
    c.work.mkdir()
    return c


def succeeding_role(c):
    return f"""
RAWMARK-count-the-run:
  cmd.run:
    - name: echo ran >> {c.marker}; echo RAWMARK-stdout
RAWMARK-comment-and-pillar:
  test.configurable_test_state:
    - changes: True
    - result: True
    - comment: "RAWMARK-comment {{{{ pillar['secret'] }}}}"
RAWMARK-managed-file:
  file.managed:
    - name: {c.work}/RAWMARK-file.txt
    - contents: "{{{{ pillar['secret'] }}}}"
"""


def assert_no_raw_data(store):
    files = store_files(store)
    assert files, "the store should hold the claim and the receipt"
    blob = b"\n".join([*files.values(), *(name.encode() for name in files)])
    for raw in (*RAW_MARKERS, "ran", "changes", "comment", "stdout"):
        assert raw.encode() not in blob


def assert_no_state_cache(minion):
    assert not (minion.cachedir / "sls.p").exists()
    assert not (minion.cachedir / "highstate.cache.p").exists()



def test_capabilities_answer_through_the_loader(minion):
    answer, retcode = minion.publish("oduflow_job.capabilities", [], new_jid())
    assert answer == {"protocol": 1, "module_version": "1.0.0", "salt_version": "3006.27"}
    assert retcode == 0


def test_a_succeeding_role_commits_a_succeeded_receipt_with_no_raw_data_anywhere(minion, case):
    minion.write_role("roles.client_stack", succeeding_role(case))
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.run(request_id, "configure", jid=jid)
    assert answer == answer_for(minion, request_id, jid, "succeeded", 3, 3)
    assert retcode == 0
    assert marker_count(case.marker) == 1
    assert (case.work / "RAWMARK-file.txt").read_text().strip() == PILLAR_SECRET
    assert minion.status(request_id, jid, "configure") == (answer, 0)
    assert_no_raw_data(case.store)
    assert_no_state_cache(minion)


def test_a_failing_state_commits_a_failed_receipt_with_retcode_zero(minion, case):
    minion.write_role(
        "roles.client_storage_resize",
        f"""
count:
  cmd.run:
    - name: echo ran >> {case.marker}
RAWMARK-fails:
  test.fail_without_changes:
    - comment: RAWMARK-failure {{{{ pillar['secret'] }}}}
""",
    )
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.run(request_id, "volume_resize", jid=jid)
    assert answer == answer_for(minion, request_id, jid, "failed", 1, 2, "volume_resize")
    assert retcode == 0
    assert marker_count(case.marker) == 1
    assert_no_raw_data(case.store)
    assert_no_state_cache(minion)


@pytest.mark.parametrize(
    "role_text",
    [
        "{{ undefined_variable.attribute }}\nRAWMARK:\n  test.nop: []\n",
        "",
        "# only a comment\n",
        None,
    ],
    ids=["render-error", "empty-sls", "comment-only-sls", "missing-sls"],
)
def test_a_role_that_does_not_compile_to_states_commits_an_unknown_receipt(minion, case, role_text):
    role_file = minion.root / "srv" / "roles" / "client_credentials.sls"
    if role_text is None:
        role_file.unlink(missing_ok=True)
    else:
        role_file.write_text(role_text)
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.run(request_id, "credentials", jid=jid)
    assert answer == answer_for(minion, request_id, jid, "unknown", 0, 0, "credentials")
    assert retcode == 0
    assert_no_raw_data(case.store)


def test_custom_high_data_runs_through_state_high_bound_by_its_digest(minion, case):
    high = {
        "RAWMARK-custom": {"cmd.run": [{"name": f"echo ran >> {case.marker}; echo RAWMARK"}]},
        "RAWMARK-check": {"test": ["succeed_with_changes", {"name": "RAWMARK-name"}]},
    }
    text = json.dumps(high, separators=(",", ":"), sort_keys=True)
    digest = minion.globals["_state_digest"](text)
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.run(request_id, "custom", text, jid=jid)
    assert answer == answer_for(minion, request_id, jid, "succeeded", 2, 2, "custom", digest)
    assert retcode == 0
    assert marker_count(case.marker) == 1
    assert minion.status(request_id, jid, "custom", digest) == (answer, 0)
    assert_no_raw_data(case.store)


def test_custom_high_data_naming_a_missing_state_module_fails(minion, case):
    text = '{"RAWMARK":{"nosuchmodule.run":[{"name":"x"}]}}'
    answer, _ = minion.run(new_uuid(), "custom", text)
    assert (answer["status"], answer["passed"], answer["total"]) == ("failed", 0, 1)


@pytest.mark.parametrize(
    "extra_arg",
    ["test=True", "queue=True", "concurrent=True", "saltenv=base", {"__kwarg__": True, "pillar": {"a": 1}}],
)
def test_caller_options_in_the_publication_are_refused_before_any_state_work(minion, case, extra_arg):
    minion.write_role("roles.client_stack", succeeding_role(case))
    answer, retcode = minion.publish("oduflow_job.run", [new_uuid(), "configure", "", extra_arg], new_jid())
    assert answer["error"] == "forbidden_option" and set(answer) == {"protocol", "error", "message"}
    assert retcode == 1
    assert marker_count(case.marker) == 0 and not case.store.exists()


def test_a_caller_supplied_pub_jid_is_replaced_by_the_publication_jid(minion, case):
    minion.write_role("roles.client_stack", succeeding_role(case))
    jid = new_jid()
    answer, _ = minion.publish("oduflow_job.run", [new_uuid(), "configure", "", "__pub_jid=99999999999999999999"], jid)
    assert answer["jid"] == jid and answer["status"] == "succeeded"


def test_the_publication_jid_becomes_the_state_run_jid(minion, case, monkeypatch):
    import salt.state

    seen = []
    original_init = salt.state.State.__init__

    def recording_init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        seen.append(self.jid)

    monkeypatch.setattr(salt.state.State, "__init__", recording_init)
    minion.write_role("roles.client_stack", succeeding_role(case))
    jid = new_jid()
    minion.run(new_uuid(), "configure", jid=jid)
    assert seen == [jid]


def test_a_minion_with_a_non_canonical_id_refuses_to_run(minion, case):
    opts = minion.globals["__opts__"]
    original = opts["id"]
    opts["id"] = "web-01"
    try:
        answer, retcode = minion.run(new_uuid(), "configure")
    finally:
        opts["id"] = original
    assert answer["error"] == "invalid_minion_id" and retcode == 1
    assert not case.store.exists()


def test_another_running_state_job_reduces_to_unknown_without_running_the_role(minion, case):
    import salt.minion
    import salt.payload

    minion.write_role("roles.client_stack", succeeding_role(case))
    proc_dir = Path(salt.minion.get_proc_dir(str(minion.cachedir)))
    other_jid = new_jid()
    proc_file = proc_dir / other_jid
    # A living process whose command line names salt, registered as a state.sls job.
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", "salt-state-job"], stdin=subprocess.PIPE)
    proc_file.write_bytes(salt.payload.dumps({"fun": "state.sls", "pid": other.pid, "jid": other_jid}))
    try:
        answer, _ = minion.run(new_uuid(), "configure")
    finally:
        proc_file.unlink(missing_ok=True)
        other.communicate(b"")
    assert (answer["status"], answer["passed"], answer["total"]) == ("unknown", 0, 0)
    assert marker_count(case.marker) == 0


def test_per_state_events_are_silenced_during_a_managed_apply_and_restored_afterwards(minion, case, monkeypatch):
    import salt.state

    fired = []
    monkeypatch.setattr(salt.state.State, "event", lambda self, ret, length, fire_event=False: fired.append(fire_event))
    minion.write_role(
        "roles.client_stack",
        f"""
RAWMARK-loud:
  cmd.run:
    - name: echo ran >> {case.marker}
    - fire_event: RAWMARK/custom/tag
""",
    )
    answer, _ = minion.run(new_uuid(), "configure")
    assert answer["status"] == "succeeded" and fired == []
    minion.functions["state.sls"]("roles.client_stack")
    assert fired == ["RAWMARK/custom/tag"]


def test_a_parallel_state_is_refused_and_leaves_no_parallel_result_files(minion, case):
    minion.write_role(
        "roles.client_stack",
        f"""
RAWMARK-parallel:
  cmd.run:
    - name: echo ran >> {case.marker}
    - parallel: True
""",
    )
    before = set(os.listdir(minion.cachedir))
    jid = new_jid()
    answer, _ = minion.run(new_uuid(), "configure", jid=jid)
    assert (answer["status"], answer["passed"], answer["total"]) == ("failed", 0, 1)
    assert marker_count(case.marker) == 0
    assert not (minion.cachedir / jid).exists()
    assert set(os.listdir(minion.cachedir)) - before == set()
    assert_no_raw_data(case.store)


def test_a_plain_state_sls_after_a_managed_apply_writes_its_caches_normally(minion, case):
    import salt.state
    import salt.utils.files

    originals = (salt.utils.files.fopen, salt.state.State.event, salt.state.State.call_parallel)
    minion.write_role("roles.client_stack", succeeding_role(case))
    answer, _ = minion.run(new_uuid(), "configure")
    assert answer["status"] == "succeeded"
    assert_no_state_cache(minion)
    assert (salt.utils.files.fopen, salt.state.State.event, salt.state.State.call_parallel) == originals

    plain = minion.functions["state.sls"]("roles.client_stack", concurrent=True)
    assert all(state["result"] is True for state in plain.values())
    assert marker_count(case.marker) == 2
    assert (minion.cachedir / "sls.p").stat().st_size > 0
    assert (minion.cachedir / "highstate.cache.p").stat().st_size > 0
    assert PILLAR_SECRET.encode() in (minion.cachedir / "sls.p").read_bytes()


def test_salt_call_loads_the_module_injects_its_jid_and_returns_error_answers_with_retcode_one(minion, case):
    minion.write_role("roles.client_stack", succeeding_role(case))
    salt_call = Path(sys.executable).with_name("salt-call")
    base = [str(salt_call), "--local", "-c", str(minion.root), "--out", "json"]
    request_id = new_uuid()

    done = subprocess.run([*base, "oduflow_job.run", request_id, "configure", ""], capture_output=True, check=False)
    answer = json.loads(done.stdout)["local"]
    assert done.returncode == 0
    assert answer["status"] == "succeeded" and answer["request_id"] == request_id
    assert minion.globals["_validate_jid"](answer["jid"]) == answer["jid"]
    assert marker_count(case.marker) == 1

    refused = subprocess.run(
        [*base, "oduflow_job.run", new_uuid(), "configure", "", "test=True"], capture_output=True, check=False
    )
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["local"]["error"] == "forbidden_option"
    assert marker_count(case.marker) == 1
