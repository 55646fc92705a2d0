"""Minion side of the crash-state enumeration (packages/test-harness/src/crash).

Runs oduflow_job.py imported by path, without Salt's loader, the way the
module's by-path tests do (packages/minion-wrapper/tests/conftest.py): fake
``__opts__``/``__context__``/``__salt__``, a stand-in ``state.sls`` that hands
its compiled chunks to ``State.call_chunks`` (where the module's claim gate
sits) and appends a line to a marker file for every real execution.

Modes (one JSON argument, answers on stdout):

- ``setup``: a store that already served an earlier request (directories,
  locks and that request's files exist), for scenarios that are not a
  minion's first apply.
- ``record``: the scenario's one call, meant to run under strace. Every
  ``_crash_point`` the module reaches is made visible to the trace as a
  stat() of ``<base>/.crash-milestone/<name>`` (and ``done`` once ``run``
  returned); the stand-in state's marker lives in ``<base>/.crash-effects``.
- ``recover``: reads one JSON object per line (a crash state's store) and
  answers, per line, what the module's real recovery says: ``status`` for the
  publication, a later plain ``run`` delivery of the same JID (counting real
  executions), and ``status`` again; and, on a copy of the state, a delivery
  of the same JID that ``run`` refuses (an extra publication key), then
  ``status``.
"""

import contextlib
import importlib.util
import itertools
import json
import os
import shutil
import sys
import traceback

MILESTONE_DIR = ".crash-milestone"
EFFECT_DIR = ".crash-effects"

_jids = itertools.count(1)

RESULTS = {
    "succeed": {"a": {"result": True}, "b": {"result": True}},
    "fail": {"a": {"result": True}, "b": {"result": False}},
    "render_error": ["Rendering SLS 'base:roles.client_stack' failed"],
}
CHUNK = {"state": "test", "fun": "nop", "__id__": "a", "name": "a"}


def load_module(path):
    spec = importlib.util.spec_from_file_location("oduflow_job_crash_states", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stub_call_chunks(self, chunks):
    """Stands in for Salt's ``State.call_chunks`` (same signature): the module's gate wraps it."""
    return {}


class FakeState:
    """``state.sls``: compiles (hands chunks to the gate), then runs (one marker line), then returns ``result``."""

    def __init__(self, marker, result, chunks, compiles):
        self.marker = marker
        self.result = result
        self.chunks = chunks
        self.compiles = compiles

    def __call__(self, *args, **kwargs):
        import salt.state

        if not self.compiles:
            return self.result  # a render error: no chunk, no state ran
        salt.state.State.call_chunks(None, self.chunks)
        with open(self.marker, "a") as out:
            out.write("ran\n")
        return self.result


def fake_state(scenario, marker):
    kind = scenario["kind"]
    chunks = [{**CHUNK, "parallel": True}] if kind == "parallel" else [CHUNK]
    return FakeState(marker, RESULTS.get(kind, RESULTS["succeed"]), chunks, kind != "render_error")


def publication(minion_id, fun, args, jid, extra=None):
    """The ``__pub_*`` keywords Salt injects for the master's plain publication (conftest.publication)."""
    load = {
        "__pub_fun": fun,
        "__pub_arg": list(args),
        "__pub_tgt": [minion_id],
        "__pub_tgt_type": "list",
        "__pub_jid": jid,
        "__pub_ret": "",
        "__pub_user": "root",
    }
    load.update(extra or {})
    return load


def status_jid():
    return "20990101000000" + f"{next(_jids) % 10**6:06d}"


class Minion:
    def __init__(self, module_path, cachedir):
        import salt.state

        salt.state.State.call_chunks = stub_call_chunks
        self.module = load_module(module_path)
        self.cachedir = cachedir

    def configure(self, store, minion_id, state):
        self.module.__opts__ = {
            "id": minion_id,
            "multiprocessing": True,
            "cachedir": self.cachedir,
            "oduflow_receipt_dir": store,
        }
        self.module.__context__ = {}
        self.module.__salt__ = {"state.sls": state}

    def run(self, case, extra=None):
        args = [case["request_id"], case["profile"], ""]
        pub = publication(case["minion_id"], "oduflow_job.run", args, case["jid"], extra)
        return self.module.run(*args, **pub)

    def status(self, case):
        args = [case["request_id"], case["jid"], case["profile"], ""]
        return self.module.status(*args, **publication(case["minion_id"], "oduflow_job.status", args, status_jid()))


def milestone(base, name):
    with contextlib.suppress(FileNotFoundError):
        os.stat(os.path.join(base, MILESTONE_DIR, name))


def store_of(base):
    return os.path.join(base, "store")


def setup(config):
    """A store that served an earlier request to completion."""
    base = config["base"]
    minion = Minion(config["module"], config["cachedir"])
    marker = os.path.join(config["cachedir"], "setup-marker")
    minion.configure(store_of(base), config["minion_id"], FakeState(marker, RESULTS["succeed"], [CHUNK], True))
    earlier = {**config, "request_id": config["earlier_request_id"], "jid": config["earlier_jid"]}
    answer = minion.run(earlier)
    if answer.get("status") != "succeeded":
        raise SystemExit(f"setup run did not succeed: {answer}")
    return {"answer": answer}


def record(config):
    base = config["base"]
    scenario = config["scenario"]
    minion = Minion(config["module"], config["cachedir"])
    marker = os.path.join(base, EFFECT_DIR, "marker")
    minion.configure(store_of(base), config["minion_id"], fake_state(scenario, marker))
    minion.module._crash_point = lambda name: milestone(base, name)
    extra = {"__pub_metadata": {"note": "x"}} if scenario["kind"] == "forbidden" else None
    answer = minion.run(config, extra)
    milestone(base, "done")
    umask = os.umask(0)
    os.umask(umask)
    return {"answer": answer, "umask": umask, "uid": os.geteuid(), "gid": os.getegid()}


def recover(config):
    minion = Minion(config["module"], config["cachedir"])
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        try:
            marker = case["marker"]
            minion.configure(case["store"], case["minion_id"], fake_state(case["redeliver"], marker))
            # A refusing delivery of the same JID, on a copy of the state: a refusal is never
            # written over a claim or a receipt, and never changes what status answers.
            copy = case["store"] + "-refusal"
            if os.path.isdir(case["store"]):
                shutil.copytree(case["store"], copy, symlinks=True)
            minion.configure(copy, case["minion_id"], fake_state(case["redeliver"], marker))
            refusal = minion.run(case, {"__pub_metadata": {"note": "x"}})
            after_refusal = minion.status(case)
            minion.configure(case["store"], case["minion_id"], fake_state(case["redeliver"], marker))
            first = minion.status(case)
            redelivery = minion.run(case)
            after = minion.status(case)
            executions = 0
            if os.path.exists(marker):
                with open(marker) as lines:
                    executions = len(lines.read().splitlines())
            answer = {
                "status": first,
                "redelivery": redelivery,
                "after": after,
                "executions": executions,
                "refusal": refusal,
                "after_refusal": after_refusal,
            }
        except Exception:  # noqa: BLE001 - reported to the enumerator as a finding, never swallowed
            answer = {"exception": traceback.format_exc(limit=5)}
        print(json.dumps(answer), flush=True)


def main():
    mode, config = sys.argv[1], json.loads(sys.argv[2])
    result = {"setup": setup, "record": record, "recover": recover}[mode](config)
    if result is not None:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
