"""mutmut 2.5.1 hooks for oduflow_job.py (scripts/mutation.sh puts this directory on PYTHONPATH).

``pre_mutation`` picks, per mutant, the tests that can see it: every mutant
runs the by-path suites; a mutant inside the durable core (the store, the
claim, the receipt and refusal commits, status) also runs the crash-state
enumeration of the module's writes, which is what sees a lost fsync or a
reordered write. ``ODUFLOW_MUTMUT_SCOPE=durable`` (the default of
``npm run verify``) mutates only the durable core; ``all`` mutates the whole
module. Mutants of message text (a line that is only a string, or the
message argument of an error) are skipped: they cannot change a decision.
"""

import ast
import os
import re

MODULE = "packages/minion-wrapper/salt/_modules/oduflow_job.py"

# The durable core: what writes the store, reads its evidence back, and decides from it.
DURABLE_CORE = {
    "_Store.open",
    "_Store.read",
    "_Store.write",
    "_Store.remove_stale_temps",
    "_open_dir",
    "_check_file",
    "_open_lock_file",
    "_read_evidence",
    "_jid_index_is_valid",
    "_ManagedApply.claim",
    "_apply",
    "_answer_from_evidence",
    "_refuse",
    "_commit_refusal",
    "_status",
}
# What the crash-state enumeration also runs for (with the by-path suites) under ODUFLOW_MUTMUT_SCOPE=all.
CRASH_STATE_FUNCTIONS = DURABLE_CORE | {
    "_Store.close",
    "_Store.lock",
    "_Store.lock_without_waiting_on_a_worker",
    "_Store.probe_lock",
    "_path_names",
    "_refused_open",
    "_ManagedApply.gate",
    "_run",
}

_MESSAGE_LINE = re.compile(r"""^\s*(f?"[^"]*"|f?'[^']*')\s*[,)]?\s*$""")
# An error raised with only a message: mutating the text cannot change a decision.
_MESSAGE_CALL = re.compile(r"""^\s*(raise )?(_unsafe|_malformed|ProtocolError)\((\s*"[a-z_]+",)?\s*f?"[^"]*"\)( from None)?\s*$""")


def _function_of_line():
    with open(MODULE) as source:
        tree = ast.parse(source.read())
    owner = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    for line in range(child.lineno, child.end_lineno + 1):
                        owner[line] = name
                visit(child, f"{name}.")

    visit(tree, "")
    return owner


_OWNER = _function_of_line()
_SCOPE = os.environ.get("ODUFLOW_MUTMUT_SCOPE", "durable")
# A comma-separated list of functions narrows the durable scope further (a quicker, targeted run).
_ONLY = {name for name in os.environ.get("ODUFLOW_MUTMUT_FUNCTIONS", "").split(",") if name}
_BASE = "bash scripts/mutation/mutmut-runner.sh"


def pre_mutation(context):
    line = context.current_source_line
    function = _OWNER.get(context.current_line_index + 1)
    if _MESSAGE_LINE.match(line) or _MESSAGE_CALL.match(line) or line.strip().startswith(("log.", "#")):
        context.skip = True
        return
    if _SCOPE == "durable" and (function not in DURABLE_CORE or (_ONLY and function not in _ONLY)):
        context.skip = True
        return
    crash_states = function in CRASH_STATE_FUNCTIONS
    context.config.test_command = f"env ODUFLOW_MUTMUT_CRASH_STATES={int(crash_states)} {_BASE}"
