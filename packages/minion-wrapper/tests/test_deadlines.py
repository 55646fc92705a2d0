"""Every Python test has a deadline: a lock that blocks fails the test instead of hanging the run.

Mutation testing found it: with the module's execution lock made blocking,
three tests waited for ever. ``pytest.ini`` gives every test pytest-timeout's
deadline with the signal method; this proves the mechanism ends exactly that
hang, in a separate pytest run holding the lock from here.
"""

import fcntl
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from conftest import MODULE_PATH

REPO = Path(__file__).resolve().parents[3]


def test_pytest_ini_gives_every_test_a_deadline_in_its_own_thread(pytestconfig):
    assert float(pytestconfig.getini("timeout")) > 0
    assert pytestconfig.getini("timeout_method") == "signal"


def test_a_test_blocked_on_a_held_execution_lock_fails_at_its_deadline_instead_of_hanging(tmp_path):
    store = tmp_path / "store"
    blocked = tmp_path / "test_blocked.py"
    blocked.write_text(
        textwrap.dedent(
            f"""
            import importlib.util

            def test_takes_the_execution_lock_blocking():
                spec = importlib.util.spec_from_file_location("oduflow_job_blocked", {str(MODULE_PATH)!r})
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                with module._Store.open({str(store)!r}, create=True) as opened:
                    opened.lock("execution.lock", blocking=True)
            """
        )
    )
    # The store exists (made by the module) and this process holds its execution lock, as a running apply would.
    make_store = f"""
import importlib.util
import os
spec = importlib.util.spec_from_file_location("oduflow_job_store", {str(MODULE_PATH)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
store = module._Store.open({str(store)!r}, create=True)
os.close(store.lock("execution.lock", blocking=False))  # creates the lock file, as a first run does
store.close()
"""
    subprocess.run([sys.executable, "-c", make_store], check=True, timeout=60)
    fd = os.open(store / "locks" / "execution.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        started = time.monotonic()
        ini = ["-c", str(REPO / "pytest.ini"), "--rootdir", str(tmp_path), "-o", "timeout=2"]
        run = subprocess.run(
            [sys.executable, "-m", "pytest", *ini, "-p", "no:cacheprovider", "-q", str(blocked)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.monotonic() - started
    finally:
        os.close(fd)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Timeout" in run.stdout
    assert "1 failed" in run.stdout
    assert elapsed < 30
