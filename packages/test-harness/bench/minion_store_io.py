"""Issue 12 item 2, protocol I/O: the module's own store writes vs bare atomic writes.

Run by bench/minion-overhead.ts with the repository's venv Python:

    python minion_store_io.py <module path> <bench dir> <runs> <applies per run> <history>

``history`` applies go into the store first, untimed, so the store holds a
minion's past receipts the way a real one does (the module lists its record
directories on every apply); what each timed step writes is removed after
it, untimed, so the store holds exactly that history all run long.

It imports oduflow_job.py by path with the Salt dunders supplied (the way
packages/minion-wrapper/tests/conftest.py does), so the store code timed is
the module's own, not a copy. Per apply it times, interleaved in one loop:

- ``apply``: what ``_run`` and ``_apply`` do to the store for one publication
  (store open, execution lock, request lock, temp sweep, evidence read, the
  JID index and the ``running`` claim, the terminal receipt). Only the state
  call is stubbed: it claims the way the gate does before the first chunk and
  returns one succeeded state, so no Salt state machinery is in the time.
- ``writes``: the module's three ``_Store.write`` calls alone on an open store.
- ``floor``: three bare ``open(O_EXCL) + write + fsync + close + rename +
  fsync(dir)`` sequences of the same sizes in the same directories (their
  directory fds opened once, outside the time).
- two parts of ``apply`` alone, to show where its time goes: ``sweep`` (the
  temp-file sweep, which lists the record directories) and ``lock`` (taking
  a new request's lock, which creates its lock file).

The order rotates every apply. It prints one JSON object (no
paths) on stdout: per-run median milliseconds of each, and the syscalls one
apply makes (counted once, untimed).
"""

import contextlib
import fcntl
import importlib.util
import json
import os
import secrets
import statistics
import sys
import time
import uuid

_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_jid_counter = iter(range(1, 10**6))


def load_module(path):
    spec = importlib.util.spec_from_file_location("oduflow_job_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def new_binding(minion_id):
    return {
        "minion_id": minion_id,
        "request_id": str(uuid.uuid4()),
        "jid": time.strftime("%Y%m%d%H%M%S") + f"{next(_jid_counter):06d}",
        "profile": "production",
        "state_digest": "",
    }


def one_state_call(apply, _high_data):
    """Stands in for ``_call_state``: the gate's claim, then one succeeded state."""
    apply.claim()
    return {"test_|-one_|-one_|-succeed_without_changes": {"result": True}}


def module_apply(module, root, binding):
    """The store part of ``_run``: open, execution lock, then the module's own ``_apply``."""
    with module._Store.open(root, create=True) as store:
        execution_lock = store.lock("execution.lock", blocking=False)
        try:
            answer = module._apply(store, binding, None)
        finally:
            os.close(execution_lock)
    if answer.get("status") != "succeeded":
        raise RuntimeError("the stubbed apply did not succeed")


def three_values(binding):
    """What one apply writes: the JID index, the ``running`` claim, the terminal receipt."""
    return (
        {"protocol": 1, **binding},
        {"protocol": 1, **binding, "status": "running", "passed": 0, "total": 0},
        {"protocol": 1, **binding, "status": "succeeded", "passed": 1, "total": 1},
    )


def module_writes(module, store, binding):
    """The three atomic writes of one apply, through the module's ``_Store.write``."""
    rid = binding["request_id"]
    index, running, receipt = three_values(binding)
    store.write("jids", binding["jid"] + ".json", index, rid)
    store.write("requests", rid + ".json", running, rid)
    store.write("requests", rid + ".json", receipt, rid)


def bare_write(dir_fd, name, data):
    temp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)


def floor_writes(module, dirs, binding):
    """Three bare atomic writes of the same bytes (the module's canonical text, encoded outside the time)."""
    rid = binding["request_id"]
    index, running, receipt = (module._canonical_json(value).encode() for value in three_values(binding))
    start = time.perf_counter()
    bare_write(dirs["jids"], binding["jid"] + ".json", index)
    bare_write(dirs["requests"], rid + ".json", running)
    bare_write(dirs["requests"], rid + ".json", receipt)
    return time.perf_counter() - start


def forget(dirs, binding):
    """Remove what one timed step wrote (untimed), so the store keeps exactly its history all run long."""
    rid = binding["request_id"]
    for subdir, name in (("jids", binding["jid"] + ".json"), ("requests", rid + ".json"), ("locks", rid + ".lock")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dirs[subdir])


@contextlib.contextmanager
def counting_syscalls():
    """Counts os.open / os.fsync / fcntl.flock / os.listdir calls (module globals resolve them at call time)."""
    counts = {"open": 0, "fsync": 0, "flock": 0, "listdir": 0}
    originals = {"open": os.open, "fsync": os.fsync, "flock": fcntl.flock, "listdir": os.listdir}

    def wrap(name, fn):
        def counted(*args, **kwargs):
            counts[name] += 1
            return fn(*args, **kwargs)

        return counted

    os.open = wrap("open", originals["open"])
    os.fsync = wrap("fsync", originals["fsync"])
    fcntl.flock = wrap("flock", originals["flock"])
    os.listdir = wrap("listdir", originals["listdir"])
    try:
        yield counts
    finally:
        os.open, os.fsync = originals["open"], originals["fsync"]
        fcntl.flock, os.listdir = originals["flock"], originals["listdir"]


def main(argv):
    module_path, bench_dir = argv[1], argv[2]
    runs, applies, history = int(argv[3]), int(argv[4]), int(argv[5])
    module = load_module(module_path)
    minion_id = "client-" + str(uuid.uuid4())
    cachedir = os.path.join(bench_dir, "cache")
    os.makedirs(cachedir, mode=0o700, exist_ok=True)
    module.__opts__ = {"id": minion_id, "cachedir": cachedir, "oduflow_receipt_dir": os.path.join(bench_dir, "store")}
    module.__context__ = {}
    module._call_state = one_state_call
    root = module.__opts__["oduflow_receipt_dir"]

    # History and warm-up (creates the store, the execution lock, Python's caches), then count one apply's syscalls.
    for _past in range(max(1, history)):
        module_apply(module, root, new_binding(minion_id))
    with counting_syscalls() as apply_calls:
        module_apply(module, root, new_binding(minion_id))
    store = module._Store.open(root, create=True)
    with counting_syscalls() as write_calls:
        module_writes(module, store, new_binding(minion_id))
    dirs = {name: os.open(os.path.join(root, name), _DIR_FLAGS) for name in ("jids", "requests", "locks")}
    with counting_syscalls() as floor_calls:
        floor_writes(module, dirs, new_binding(minion_id))
    sizes = [len(module._canonical_json(value).encode()) for value in three_values(new_binding(minion_id))]

    kinds = ("apply", "writes", "floor", "sweep", "lock")
    samples = {kind: [] for kind in kinds}
    for _run in range(runs):
        times = {kind: [] for kind in kinds}
        for i in range(applies):
            for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
                binding = new_binding(minion_id)
                if kind == "floor":
                    times[kind].append(floor_writes(module, dirs, binding))
                    forget(dirs, binding)
                    continue
                start = time.perf_counter()
                if kind == "apply":
                    module_apply(module, root, binding)
                elif kind == "writes":
                    module_writes(module, store, binding)
                elif kind == "sweep":
                    store.remove_stale_temps(binding["request_id"])
                else:
                    os.close(store.lock(binding["request_id"] + ".lock", blocking=True))
                times[kind].append(time.perf_counter() - start)
                forget(dirs, binding)
        # The run's median apply: one fsync stalled by a neighbour's I/O does not move it.
        for kind, values in times.items():
            samples[kind].append(statistics.median(values) * 1000)
    store.close()
    for fd in dirs.values():
        os.close(fd)

    print(
        json.dumps(
            {
                "runs": runs,
                "applies_per_run": applies,
                "history": history,
                "file_bytes": sizes,
                "ms_per_apply": samples,
                "syscalls_per_apply": {"apply": apply_calls, "writes": write_calls, "floor": floor_calls},
                "median_ms": {kind: statistics.median(values) for kind, values in samples.items()},
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv)
