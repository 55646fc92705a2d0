"""No raw state output reaches a log line during a managed apply.

Salt logs failed states' comments, changes and stdout/stderr at ERROR
(``salt.state.format_log``, ``cmdmod``). Through Salt 3006.27's real loader,
in a forked child that configures Salt's own logging as a minion process does
(``salt._logging.setup_logging`` with ``log_level_logfile``), a managed apply
of failing states with marker strings everywhere must leave no marker in the
log file, and a plain ``state.sls`` afterwards in the same process must log
normally again.
"""

import logging
import os
import sys

import pytest

from conftest import SaltMinionEnv, collect, fork_and_run, new_uuid

MARKERS = ("MARKNAME", "MARKSTDOUT", "MARKSTDERR", "MARKCOMMENT", "MARKFILE", "MARKCONTENT", "MARKCHANGE")
SUPPRESSED = "record suppressed during a managed apply (oduflow_job)"


@pytest.fixture(scope="module")
def minion(tmp_path_factory):
    return SaltMinionEnv(tmp_path_factory.mktemp("minion"))


def failing_role(work):
    return f"""
MARKNAME-cmd:
  cmd.run:
    - name: echo MARKSTDOUT-1; echo MARKSTDERR-2 >&2; exit 3
MARKNAME-file:
  file.managed:
    - name: {work}/missing-MARKFILE/dir/file.txt
    - contents: MARKCONTENT-4
MARKNAME-comment:
  test.configurable_test_state:
    - result: False
    - changes: True
    - comment: MARKCOMMENT-5 {{{{ pillar['secret'] }}}}
MARKNAME-changes:
  test.configurable_test_state:
    - result: True
    - changes: True
    - comment: MARKCHANGE-6
"""


def _apply_then_plain_sls(minion, log_file, level):
    import salt._logging

    opts = dict(minion.opts, log_file=str(log_file), log_level="quiet", log_level_logfile=level)
    salt._logging.set_logging_options_dict(opts)
    salt._logging.setup_logging()
    handlers = list(logging.getLogger().handlers)

    def flushed_log():
        for handler in handlers:
            handler.flush()
        return log_file.read_text() if log_file.exists() else ""

    def handler_state():
        # Every handler anywhere (Salt's NullHandlers, pytest's, lastResort):
        # its filters and any instance-level ``handle``.
        every = minion.globals["_log_handlers"]()
        return {id(h): (list(h.filters), h.__dict__.get("handle")) for h in every}

    before = handler_state()
    answer, retcode = minion.run(new_uuid(), "configure")
    managed_log = flushed_log()
    after = handler_state()
    filters_left = [repr(after[key]) for key in before if after.get(key) != before[key]]
    minion.functions["state.sls"]("roles.client_stack", concurrent=True)
    plain_log = flushed_log()[len(managed_log) :]
    return {
        "status": answer.get("status"),
        "retcode": retcode,
        "managed_log": managed_log,
        "plain_log": plain_log,
        "filters_left": filters_left,
    }


@pytest.mark.parametrize("level", ["warning", "debug"])
def test_a_managed_apply_logs_no_raw_state_output_and_plain_states_log_normally_afterwards(minion, tmp_path, level):
    from conftest import PILLAR_SECRET

    work = tmp_path / "work"
    work.mkdir()
    minion.use_store(tmp_path / "store")
    minion.write_role("roles.client_stack", failing_role(work))
    log_file = tmp_path / "minion.log"

    wait_status, result = collect(*fork_and_run(lambda: _apply_then_plain_sls(minion, log_file, level)))

    assert os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == 0
    assert result["status"] == "failed" and result["retcode"] == 0
    managed_log = result["managed_log"]
    leaked = [marker for marker in (*MARKERS, PILLAR_SECRET) if marker in managed_log]
    assert not leaked, managed_log[-3000:]
    # Operators still see that Salt logged something, by whom and at which level.
    assert f"salt.state: ERROR {SUPPRESSED}" in managed_log
    assert result["filters_left"] == []
    # The same process, after the managed apply: Salt's own logging is back.
    plain_log = result["plain_log"]
    assert SUPPRESSED not in plain_log
    expected = ("MARKSTDOUT", "MARKSTDERR") + (("MARKNAME", "MARKFILE") if level == "debug" else ())
    for marker in expected:
        assert marker in plain_log, (marker, plain_log[-3000:])


def test_the_filter_blanks_every_handler_but_this_module_s_own_records_and_is_removed(loaded_module):
    import io

    from salt._logging.handlers import DeferredStreamHandler

    m = loaded_module
    plain_stream, deferred_stream = io.StringIO(), io.StringIO()
    plain = logging.StreamHandler(plain_stream)
    deferred = DeferredStreamHandler(deferred_stream)
    for handler in (plain, deferred):
        handler.setFormatter(logging.Formatter("%(name)s|%(levelname)s|%(message)s"))
    root = logging.getLogger()
    child = logging.getLogger("oduflow.test.nonpropagating")
    child.propagate = False
    root.addHandler(plain)
    child.addHandler(deferred)
    own = logging.getLogger(m.log.name)
    try:
        with m._suppressed_log_content():
            try:
                raise ValueError("MARKEXC")
            except ValueError:
                exc_info = sys.exc_info()
            logging.getLogger("salt.state").handle(
                logging.LogRecord("salt.state", logging.ERROR, __file__, 1, "comment %s", ("MARKARG",), exc_info)
            )
            record = logging.LogRecord(child.name, logging.ERROR, __file__, 1, "stdout MARKSTDOUT", None, None)
            record.stack_info = "MARKSTACK"
            child.handle(record)
            own.handle(logging.LogRecord(own.name, logging.ERROR, __file__, 1, "own record kept", None, None))
        assert plain.filters == [] and deferred.filters == []
        assert "handle" not in deferred.__dict__
        logging.getLogger("salt.state").handle(
            logging.LogRecord("salt.state", logging.ERROR, __file__, 1, "after MARKAFTER", None, None)
        )
        deferred.flush()
    finally:
        root.removeHandler(plain)
        child.removeHandler(deferred)
    plain_text, deferred_text = plain_stream.getvalue(), deferred_stream.getvalue()
    assert "MARK" not in plain_text.replace("MARKAFTER", "")
    assert f"salt.state|ERROR|salt.state: ERROR {SUPPRESSED}" in plain_text
    assert "Traceback" not in plain_text
    assert "own record kept" in plain_text and "after MARKAFTER" in plain_text
    assert "MARK" not in deferred_text and f"oduflow.test.nonpropagating: ERROR {SUPPRESSED}" in deferred_text
