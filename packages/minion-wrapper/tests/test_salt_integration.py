"""oduflow_job through Salt 3006.27's real loader and state system.

One in-process minion (salt.minion.SMinion on a temporary config) serves the
whole module; every test gets its own store and side-effect marker. Functions
are invoked as a job worker invokes them (Salt's ``Minion._thread_return``
with a publication load), so Salt itself picks the executors, injects
``__pub_*`` and computes the retcode.
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
    publication,
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


def test_capabilities_answer_ready_with_the_digest_of_the_file_salt_loaded(minion, case):
    import hashlib

    from conftest import MODULE_PATH

    answer, retcode = minion.publish("oduflow_job.capabilities", [], new_jid())
    assert answer == {
        "protocol": 1,
        "module_version": "1.1.1",
        "salt_version": "3006.27",
        "module_sha256": hashlib.sha256(MODULE_PATH.read_bytes()).hexdigest(),
        "ready": True,
        "reasons": [],
    }
    assert retcode == 0
    assert minion.globals["_validate_capabilities"](answer) == answer


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


def refused(minion, request_id, jid, reason, profile="configure"):
    return {**answer_for(minion, request_id, jid, "refused", profile=profile), "reason": reason}


def assert_only_a_refusal_on_disk(minion, c, request_id, jid, reason):
    """Exactly the JID index and the refusal record; nothing claimed, no state run."""
    answer = refused(minion, request_id, jid, reason)
    index = {k: answer[k] for k in ("protocol", "minion_id", "request_id", "jid", "profile", "state_digest")}
    canonical = minion.globals["_canonical_json"]
    files = {k: v for k, v in store_files(c.store).items() if not k.startswith("locks/")}
    assert files == {
        f"jids/{jid}.json": canonical(index).encode(),
        f"requests/{request_id}.json": canonical(answer).encode(),
    }
    assert marker_count(c.marker) == 0


@pytest.mark.parametrize(
    "extra_arg",
    [
        "test=True",
        "queue=True",
        "concurrent=True",
        "saltenv=base",
        {"__kwarg__": True, "pillar": {"a": 1}},
        {"__kwarg__": True, "__pub_x": "1"},
        "__pub_jid=99999999999999999999",
    ],
    ids=["test", "queue", "concurrent", "saltenv", "pillar", "pub-extra", "pub-jid"],
)
def test_caller_keywords_in_the_publication_are_refused_for_good_under_the_publication_jid(minion, case, extra_arg):
    minion.write_role("roles.client_stack", succeeding_role(case))
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.publish("oduflow_job.run", [request_id, "configure", "", extra_arg], jid)
    assert (answer, retcode) == (refused(minion, request_id, jid, "forbidden_option"), 1)
    assert_only_a_refusal_on_disk(minion, case, request_id, jid, "forbidden_option")
    assert minion.status(request_id, jid, "configure") == (answer, 0)


@pytest.mark.parametrize(
    "load",
    [
        {"module_executors": ["direct_call"]},
        {"module_executors": ["splay", "direct_call"], "executor_opts": {"splaytime": 1}},
        {"executor_opts": {"splaytime": 30}},
        {"ret": "nosuchreturner"},
        {"metadata": {"ticket": "1"}},
        {"ret_config": "x"},
        {"ret_kwargs": {"x": 1}},
        {"master_id": "other-master"},
        {"to": 30},
        {"delimiter": ";"},
        {"id": "x"},
        {"tgt": "client-*", "tgt_type": "glob"},
        {"tgt_type": "glob"},
        {"user": ""},
        {"_job_queue_file": "/tmp/running_1_x.p"},
    ],
    ids=lambda load: "+".join(f"{k}" for k in load),
)
def test_publication_options_are_refused_for_good_before_any_state_work(minion, case, load):
    minion.write_role("roles.client_stack", succeeding_role(case))
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.publish("oduflow_job.run", [request_id, "configure", ""], jid, load=load)
    assert (answer, retcode) == (refused(minion, request_id, jid, "forbidden_option"), 1)
    assert_only_a_refusal_on_disk(minion, case, request_id, jid, "forbidden_option")


@pytest.mark.parametrize(
    "load",
    [{"module_executors": ["sudo"]}, {"module_executors": ["splay"], "executor_opts": {"splaytime": 1}}],
    ids=["sudo", "splay-alone"],
)
def test_executors_that_never_call_the_function_leave_nothing_on_disk(minion, case, load):
    minion.write_role("roles.client_stack", succeeding_role(case))
    request_id, jid = new_uuid(), new_jid()
    answer, _ = minion.publish("oduflow_job.run", [request_id, "configure", ""], jid, load=load)
    assert not isinstance(answer, dict) or "status" not in answer
    assert not case.store.exists() and marker_count(case.marker) == 0
    assert minion.status(request_id, jid, "configure") == (answer_for(minion, request_id, jid, "not_started"), 0)


def call_with_load(minion, fun, args, data):
    """What an executor does with a load: Salt's ``load_args_and_kwargs``, then ``func(*args, **kwargs)``."""
    import salt.minion

    func = minion.functions[fun]
    call_args, call_kwargs = salt.minion.load_args_and_kwargs(func, list(args), data)
    context = minion.functions.pack["__context__"]
    answer = func(*call_args, **call_kwargs)
    return answer, context["retcode"]


@pytest.mark.parametrize("fun", ["oduflow_job.run", "oduflow_job.status"])
def test_a_call_injected_the_salt_call_way_is_refused_and_records_nothing(minion, case, fun):
    minion.write_role("roles.client_stack", succeeding_role(case))
    request_id, jid = new_uuid(), new_jid()
    args = [request_id, "configure", ""] if fun.endswith("run") else [request_id, jid, "configure", ""]
    # salt/cli/caller.py Caller.call: only fun, pid, jid and tgt "salt-call".
    salt_call_data = {"fun": fun, "pid": os.getpid(), "jid": jid, "tgt": "salt-call"}
    answer, retcode = call_with_load(minion, fun, args, salt_call_data)
    assert answer["error"] == "forbidden_option" and set(answer) == {"protocol", "error", "message"}
    assert retcode == 1
    assert not case.store.exists() and marker_count(case.marker) == 0


@pytest.mark.parametrize("missing", ["arg", "ret", "tgt_type", "user", "tgt", "fun"])
def test_a_load_missing_any_publication_key_is_not_a_master_publication(minion, case, missing):
    request_id, jid = new_uuid(), new_jid()
    data = minion.load("oduflow_job.run", [request_id, "configure", ""], jid)
    del data[missing]
    answer, retcode = call_with_load(minion, "oduflow_job.run", [request_id, "configure", ""], data)
    assert (answer["error"], retcode) == ("forbidden_option", 1)
    assert not case.store.exists()


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
        answer, retcode = minion.publish(
            "oduflow_job.run", [new_uuid(), "configure", ""], new_jid(), load={"tgt": ["web-01"]}
        )
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
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "salt-state-job"], stdin=subprocess.PIPE
    )
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

    def recording_event(self, chunk_ret, length, fire_event=False):
        fired.append(fire_event)

    monkeypatch.setattr(salt.state.State, "event", recording_event)
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


def test_a_role_with_one_parallel_state_is_refused_before_any_of_its_states_runs(minion, case):
    minion.write_role(
        "roles.client_stack",
        f"""
count-the-run:
  cmd.run:
    - name: echo ran >> {case.marker}
RAWMARK-parallel:
  cmd.run:
    - name: echo parallel >> {case.marker}
    - parallel: True
after:
  test.succeed_without_changes: []
""",
    )
    before = set(os.listdir(minion.cachedir))
    request_id, jid = new_uuid(), new_jid()
    answer, retcode = minion.run(request_id, "configure", jid=jid)
    assert (answer, retcode) == (refused(minion, request_id, jid, "parallel_refused"), 1)
    assert_only_a_refusal_on_disk(minion, case, request_id, jid, "parallel_refused")
    assert not (minion.cachedir / jid).exists()
    assert set(os.listdir(minion.cachedir)) - before == set()
    assert minion.status(request_id, jid, "configure") == (answer, 0)
    # The same JID delivered again is refused the same way, without rendering anything.
    assert minion.run(request_id, "configure", jid=jid) == (answer, 1)
    assert marker_count(case.marker) == 0


def test_a_parallel_option_added_by_extend_is_seen_in_the_compiled_chunks(minion, case):
    (minion.root / "srv" / "roles" / "parallel_base.sls").write_text(
        f"""
RAWMARK-base:
  cmd.run:
    - name: echo ran >> {case.marker}
"""
    )
    minion.write_role(
        "roles.client_stack",
        """
include:
  - roles.parallel_base
extend:
  RAWMARK-base:
    cmd:
      - parallel: True
""",
    )
    request_id, jid = new_uuid(), new_jid()
    answer, _ = minion.run(request_id, "configure", jid=jid)
    assert answer == refused(minion, request_id, jid, "parallel_refused")
    assert marker_count(case.marker) == 0


def test_the_call_parallel_guard_still_refuses_a_parallel_state_the_gate_did_not_see(minion, case, monkeypatch):
    # The gate passes everything through: what is left is the second line.
    original_gate = minion.globals["_ManagedApply"].gate

    def claim_without_inspection(self, chunks):
        return original_gate(self, [dict(low, parallel=False) for low in chunks])

    monkeypatch.setattr(minion.globals["_ManagedApply"], "gate", claim_without_inspection)
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


def test_salt_call_loads_the_module_and_is_refused_without_touching_the_store(minion, case):
    minion.write_role("roles.client_stack", succeeding_role(case))
    salt_call = Path(sys.executable).with_name("salt-call")
    base = [str(salt_call), "--local", "-c", str(minion.root), "--out", "json"]
    request_id = new_uuid()

    loaded = subprocess.run([*base, "oduflow_job.capabilities"], capture_output=True, check=False)
    assert loaded.returncode == 0 and json.loads(loaded.stdout)["local"]["protocol"] == 1

    for args in (
        ["oduflow_job.run", request_id, "configure", ""],
        ["oduflow_job.status", request_id, new_jid(), "configure", ""],
    ):
        done = subprocess.run([*base, *args], capture_output=True, check=False)
        assert done.returncode == 1
        assert json.loads(done.stdout)["local"]["error"] == "forbidden_option"
    assert marker_count(case.marker) == 0
    assert not case.store.exists() and not (minion.root / "store").exists()


# ------------------------------------------------------------------ readiness


@pytest.mark.parametrize(
    ("options", "reasons", "refusal"),
    [
        ({"cache_jobs": True}, ["cache_jobs"], "not_ready"),
        ({"minion_pillar_cache": True}, ["pillar_cache"], "not_ready"),
        ({"pillar_cache": True}, ["pillar_cache"], "not_ready"),
        ({"sudo_user": "nobody"}, ["sudo_user"], "not_ready"),
        ({"module_executors": ["splay", "direct_call"]}, ["module_executors"], "not_ready"),
        ({"gpg_cache": True}, ["gpg_cache"], "not_ready"),
        ({"multiprocessing": False}, ["multiprocessing"], "unsupported_runtime"),
        ({"multiprocessing": False, "cache_jobs": True}, ["multiprocessing", "cache_jobs"], "unsupported_runtime"),
    ],
    ids=lambda value: "+".join(value) if isinstance(value, dict) else None,
)
def test_a_minion_option_that_could_persist_raw_data_makes_it_not_ready_and_run_refuses(
    minion, case, monkeypatch, options, reasons, refusal
):
    minion.write_role("roles.client_stack", succeeding_role(case))
    opts = minion.globals["__opts__"]
    for key, value in options.items():
        monkeypatch.setitem(opts, key, value)
    answer, retcode = minion.publish("oduflow_job.capabilities", [], new_jid())
    assert (answer["ready"], answer["reasons"], retcode) == (False, reasons, 0)
    assert minion.globals["_validate_capabilities"](answer) == answer
    request_id, jid = new_uuid(), new_jid()
    # A minion-level executor list would not even reach direct_call here: ask the module directly.
    ran = minion.functions["oduflow_job.run"](
        request_id,
        "configure",
        "",
        **publication(minion.minion_id, "oduflow_job.run", [request_id, "configure", ""], jid),
    )
    assert ran == refused(minion, request_id, jid, refusal)
    assert_only_a_refusal_on_disk(minion, case, request_id, jid, refusal)


def test_a_salt_internal_with_another_signature_makes_the_minion_not_ready_and_patches_nothing(
    minion, case, monkeypatch
):
    import salt.state

    def event(self, chunk_ret, length, fire_event=False, extra=None):
        return None

    monkeypatch.setattr(salt.state.State, "event", event)
    minion.write_role("roles.client_stack", succeeding_role(case))
    answer, _ = minion.publish("oduflow_job.capabilities", [], new_jid())
    assert (answer["ready"], answer["reasons"]) == (False, ["salt_internals"])
    request_id, jid = new_uuid(), new_jid()
    assert minion.run(request_id, "configure", jid=jid) == (refused(minion, request_id, jid, "unsupported_runtime"), 1)
    assert_only_a_refusal_on_disk(minion, case, request_id, jid, "unsupported_runtime")
    assert salt.state.State.event is event


def test_an_unsafe_store_makes_the_minion_not_ready(minion, case):
    case.store.mkdir(mode=0o755)
    answer, _ = minion.publish("oduflow_job.capabilities", [], new_jid())
    assert (answer["ready"], answer["reasons"]) == (False, ["store_unsafe"])
    assert minion.run(new_uuid(), "configure")[0]["error"] == "unsafe_store"


def test_a_different_3006_release_still_loads_and_reports_itself_not_ready(minion, case, monkeypatch):
    import salt.version

    monkeypatch.setattr(salt.version, "__version__", "3006.28")
    assert minion.globals["__virtual__"]() == "oduflow_job"
    answer, _ = minion.publish("oduflow_job.capabilities", [], new_jid())
    assert (answer["salt_version"], answer["ready"], answer["reasons"]) == ("3006.28", False, ["salt_version"])
    monkeypatch.setattr(salt.version, "__version__", "3007.1")
    assert minion.globals["__virtual__"]()[0] is False


def test_pillar_cache_on_a_minion_writes_its_rendered_pillar_to_disk(minion, case):
    """Why ``pillar_cache`` counts as the ``pillar_cache`` reason: Salt persists the rendered pillar.

    The minion compiles its pillar through ``salt.pillar.get_pillar`` at start
    (salt/minion.py ``gen_modules``) and in every ``state.sls`` of a daemon
    (salt/modules/state.py ``_get_initial_pillar`` keeps the loaded pillar only
    under salt-call); with the option on that is ``PillarCache``, whose disk
    backend writes ``<cachedir>/pillar_cache/<id>`` once that directory exists.
    """
    import salt.pillar

    opts = {**minion.opts, "pillar_cache": True}
    cache = minion.cachedir / "pillar_cache" / minion.minion_id
    cache.parent.mkdir(mode=0o700, exist_ok=True)
    cache.unlink(missing_ok=True)
    pillar = salt.pillar.get_pillar(opts, opts["grains"], opts["id"], opts["saltenv"]).compile_pillar()
    assert pillar["secret"] == PILLAR_SECRET
    assert PILLAR_SECRET.encode() in cache.read_bytes()
