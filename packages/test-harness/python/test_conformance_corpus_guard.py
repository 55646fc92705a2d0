"""The conformance runner fails, never skips, when its corpus is missing or empty.

Runs test_conformance.py in a child pytest from a scratch tree whose
``fixtures`` directory is absent or empty (the runner finds the module and
the corpus relative to its own file).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().with_name("test_conformance.py")
MINION_WRAPPER = RUNNER.parents[2] / "minion-wrapper"


@pytest.mark.parametrize("corpus", ["missing", "empty", "schema-only"])
def test_the_conformance_runner_fails_without_a_corpus(tmp_path, corpus):
    harness = tmp_path / "test-harness"
    (harness / "python").mkdir(parents=True)
    shutil.copy(RUNNER, harness / "python" / RUNNER.name)
    os.symlink(MINION_WRAPPER, tmp_path / "minion-wrapper")
    if corpus != "missing":
        (harness / "fixtures").mkdir()
    if corpus == "schema-only":
        (harness / "fixtures" / "fixture.schema.json").write_text("{}")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "-o",
            "empty_parameter_set_mark=skip",
            str(harness / "python" / RUNNER.name),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    assert "test_the_corpus_is_present_and_covers_every_python_category FAILED" in done.stdout or (
        "FAILED" in done.stdout and "test_the_corpus_is_present" in done.stdout
    ), done.stdout[-2000:]
