"""Shared helpers for the oduflow_job suites.

Two ways to reach the module:

- ``loaded_module``: the file imported by path, with the Salt dunders
  (``__opts__``, ``__context__``, ``__salt__``) supplied by the test. Fast;
  used for the validation helpers, the store and every refusal branch.
- ``SaltMinionEnv``: the same file loaded by Salt 3006.27's real loader (an
  in-process ``salt.minion.SMinion`` on a temporary minion config with
  ``file_client: local``), calling the real ``state.sls`` / ``state.high``.
  Functions are invoked the way a minion job worker invokes them: Salt's own
  ``Minion._thread_return`` with a publication load, so the executors are
  chosen from the load and the minion options, ``load_args_and_kwargs``
  injects ``__pub_*``, and the retcode is the one Salt would send.
"""

import importlib.util
import itertools
import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest

MODULE_PATH = Path(__file__).resolve().parents[1] / "salt" / "_modules" / "oduflow_job.py"
MODULE_DIR = MODULE_PATH.parent

_module_counter = itertools.count()
_jid_counter = itertools.count(1)


def load_module():
    """A fresh, independent instance of oduflow_job.py imported by path."""
    name = f"oduflow_job_under_test_{next(_module_counter)}"
    spec = importlib.util.spec_from_file_location(name, MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def new_uuid():
    return str(uuid.uuid4())


def new_minion_id():
    return "client-" + new_uuid()


def new_jid():
    """A fresh 20-digit JID, unique within the test session."""
    return time.strftime("%Y%m%d%H%M%S") + f"{next(_jid_counter) % 10**6:06d}"


def wait_for(condition, timeout=30.0, interval=0.01, what="condition"):
    """Poll ``condition`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def marker_count(path):
    """How many times a test role really ran (one line per execution)."""
    try:
        return len(Path(path).read_text().splitlines())
    except FileNotFoundError:
        return 0


def store_files(root):
    """Every regular file below the store root, as {relative path: bytes}."""
    found = {}
    for directory, _subdirs, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def fork_and_run(target):
    """Run ``target()`` in a forked child; return (pid, read end of a result pipe).

    The child writes ``json.dumps(target())`` to the pipe and exits with
    ``os._exit``, so it never returns into pytest.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child process
        code = 0
        try:
            os.close(read_fd)
            payload = json.dumps(target()).encode()
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
        except BaseException:  # noqa: BLE001 - report anything as a failed child
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def collect(pid, read_fd):
    """Wait for a forked child; return (wait status, decoded result or None)."""
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _pid, wait_status = os.waitpid(pid, 0)
    return wait_status, (json.loads(data) if data else None)


def killed_by_sigkill(wait_status):
    return os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) == signal.SIGKILL


def publication(minion_id, fun, args, jid):
    """The ``__pub_*`` keywords Salt injects for the master's plain publication of ``fun``."""
    return {
        "__pub_fun": fun,
        "__pub_arg": list(args),
        "__pub_tgt": [minion_id],
        "__pub_tgt_type": "list",
        "__pub_jid": jid,
        "__pub_ret": "",
        "__pub_user": "root",
    }


def stub_call_chunks(self, chunks):
    """Stands in for Salt's ``State.call_chunks`` (same signature) under by-path tests."""
    return {}


class FakeState:
    """Stands in for ``state.sls`` / ``state.high`` in by-path tests.

    Like Salt, it hands its compiled ``chunks`` to ``State.call_chunks``
    (where the module's claim gate sits) before any state runs; ``compiles =
    False`` plays a render error that never reaches a chunk.
    """

    def __init__(self, marker, result=None):
        self.marker = Path(marker)
        self.result = result
        self.calls = []
        self.effect = None
        self.chunks = [{"state": "test", "fun": "nop", "__id__": "a", "name": "a"}]
        self.compiles = True

    def __call__(self, *args, **kwargs):
        import salt.state

        self.calls.append((args, kwargs))
        if self.compiles:
            salt.state.State.call_chunks(None, self.chunks)
        with self.marker.open("a") as out:
            out.write("ran\n")
        if self.effect is not None:
            self.effect()
        return self.result


def pytest_configure(config):
    # Salt 3006.27's own loader and optional modules on Python 3.11; not ours.
    for message in (
        r"the load_module\(\) method is deprecated",
        r"'spwd' is deprecated",
        r"'crypt' is deprecated",
    ):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


@pytest.fixture
def minion_id():
    return new_minion_id()


@pytest.fixture
def loaded_module(tmp_path, minion_id, monkeypatch):
    """oduflow_job imported by path, with dunders pointing at a private temp store."""
    import salt.state

    monkeypatch.setattr(salt.state.State, "call_chunks", stub_call_chunks)
    module = load_module()
    marker = tmp_path / "marker"
    sls = FakeState(marker, {"a": {"result": True}, "b": {"result": True}})
    high = FakeState(marker, {"a": {"result": True}})
    cachedir = tmp_path / "cache"
    cachedir.mkdir()
    module.__opts__ = {
        "id": minion_id,
        "multiprocessing": True,
        "cachedir": str(cachedir),
        "oduflow_receipt_dir": str(tmp_path / "var" / "store"),
    }
    module.__context__ = {}
    module.__salt__ = {"state.sls": sls, "state.high": high}
    module.fake_sls = sls
    module.fake_high = high
    module.marker = marker
    module.store_root = tmp_path / "var" / "store"
    module.publication = lambda fun, args, jid: publication(module.__opts__["id"], fun, args, jid)
    return module


# ---------------------------------------------------------------------------
# Salt's real loader


MINION_CONFIG = """\
root_dir: {root}/root
file_client: local
file_roots:
  base:
    - {root}/srv
pillar_roots:
  base:
    - {root}/pillar
module_dirs:
  - {module_dir}
multiprocessing: True
oduflow_receipt_dir: {root}/store
id: {minion_id}
log_level: quiet
log_level_logfile: quiet
log_file: {root}/minion.log
"""

PILLAR_SECRET = "PILLARSECRET-7c1d"


class _JobWorker:
    """What Salt's ``Minion._thread_return`` needs of a minion, over an in-process SMinion.

    ``_execute_job_function`` is Salt's own method; the return the worker
    would send to the master is captured instead of sent.
    """

    connected = True

    def __init__(self, sminion):
        import salt.minion

        self.opts = sminion.opts
        self.functions = sminion.functions
        self.executors = sminion.executors
        self.returners = sminion.returners
        self.function_errors = sminion.function_errors
        self.proc_dir = salt.minion.get_proc_dir(self.opts["cachedir"])
        self.returned = []

    def _execute_job_function(self, *args):
        import salt.minion

        return salt.minion.Minion._execute_job_function(self, *args)

    def gen_modules(self):
        # A daemon's job process rebuilds its loaders here; these tests keep
        # the SMinion's, whose module globals they adjust (store, crash seam).
        pass

    def _return_retry_timer(self, max=False):
        return 1

    def _return_pub(self, ret, timeout=None):
        self.returned.append(ret)


class SaltMinionEnv:
    """One in-process minion (Salt's real loader) with a temporary file tree."""

    def __init__(self, root, extra_config=""):
        import salt.config
        import salt.minion

        self.root = Path(root)
        self.minion_id = new_minion_id()
        for directory in ("srv/roles", "pillar", "work"):
            (self.root / directory).mkdir(parents=True, exist_ok=True)
        (self.root / "pillar" / "top.sls").write_text("base:\n  '*':\n    - secrets\n")
        (self.root / "pillar" / "secrets.sls").write_text(f"secret: {PILLAR_SECRET}\n")
        config = self.root / "minion"
        config.write_text(
            MINION_CONFIG.format(root=self.root, module_dir=MODULE_DIR, minion_id=self.minion_id) + extra_config
        )
        self.opts = salt.config.minion_config(str(config))
        # What the opts of a salt-minion daemon say (Salt records argv[0]'s name).
        self.opts["__cli"] = "salt-minion"
        self.sminion = salt.minion.SMinion(self.opts)
        self.functions = self.sminion.functions

    @property
    def globals(self):
        """The loaded module's globals (its ``__opts__``, ``_crash_point``...)."""
        return self.functions["oduflow_job.run"].__globals__

    @property
    def cachedir(self):
        return Path(self.opts["cachedir"])

    def use_store(self, path):
        self.globals["__opts__"]["oduflow_receipt_dir"] = str(path)

    def write_role(self, role, text):
        path = self.root / "srv" / "roles" / (role.split(".", 1)[1] + ".sls")
        path.write_text(text)

    def load(self, fun, args, jid):
        """The master's plain publication load of ``fun`` to this minion (salt/master.py ``_prep_pub``)."""
        return {
            "fun": fun,
            "arg": list(args),
            "tgt": [self.minion_id],
            "jid": jid,
            "ret": "",
            "tgt_type": "list",
            "user": "root",
        }

    def publish(self, fun, args, jid, load=None, drop=()):
        """Run a publication in a job worker as the minion does; (return, retcode) as Salt would send them.

        ``load`` adds or replaces keys of the master's plain load (options a
        caller smuggles in), ``drop`` removes keys.
        """
        import salt.minion

        data = {**self.load(fun, args, jid), **(load or {})}
        for key in drop:
            data.pop(key)
        worker = _JobWorker(self.sminion)
        title = _proctitle()
        try:
            salt.minion.Minion._thread_return(worker, self.opts, data)
        finally:
            _set_proctitle(title)
        (ret,) = worker.returned
        return ret["return"], ret["retcode"]

    def run(self, request_id, profile, state_data_json="", jid=None):
        return self.publish("oduflow_job.run", [request_id, profile, state_data_json], jid or new_jid())

    def status(self, request_id, jid, profile, state_digest=""):
        return self.publish("oduflow_job.status", [request_id, jid, profile, state_digest], new_jid())


def _proctitle():
    try:
        import setproctitle
    except ImportError:
        return None
    return setproctitle.getproctitle()


def _set_proctitle(title):
    # A job worker appends its name to the process title; keep pytest's.
    if title is not None:
        import setproctitle

        setproctitle.setproctitle(title)


def answer_for(minion, request_id, jid, status, passed=0, total=0, profile="configure", digest=""):
    """The exact nine-field receipt / status answer this minion owes for a publication."""
    return {
        "protocol": 1,
        "minion_id": minion.minion_id,
        "request_id": request_id,
        "jid": jid,
        "profile": profile,
        "state_digest": digest,
        "status": status,
        "passed": passed,
        "total": total,
    }
