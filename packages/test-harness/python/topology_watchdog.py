"""Watchdog of a local oduflow Salt topology (@oduflow/test-harness).

Started detached by startTopology() with: parent pid, topology directory,
remove flag ("1" or "0"). It polls the parent; once the parent is gone (a
test worker killed without calling stop()), it SIGKILLs every process of
the topology by pid -- those whose command line names a path inside the
directory, or whose working directory is inside it -- until none is left,
then removes the directory when asked. Standard library only: it runs with
the topology's venv python.
"""

import contextlib
import os
import shutil
import signal
import sys
import time

POLL_SECONDS = 0.5
KILL_ROUNDS = 100
KILL_ROUND_SECONDS = 0.1


def parent_alive(ppid):
    try:
        os.kill(ppid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def topology_pids(root, prefix, me):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmd = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            cwd = ""
        if prefix in cmd or cwd == root or cwd.startswith(prefix):
            found.append(int(entry))
    return found


def kill_all(root, prefix, me):
    for _ in range(KILL_ROUNDS):
        pids = topology_pids(root, prefix, me)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(KILL_ROUND_SECONDS)


def main(argv):
    ppid, root, remove = int(argv[1]), argv[2], argv[3] == "1"
    prefix = root.rstrip("/") + "/"
    while parent_alive(ppid):
        time.sleep(POLL_SECONDS)
    kill_all(root, prefix, os.getpid())
    if remove:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
