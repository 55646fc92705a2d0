"""The canonical-JSON ratio bench (bench/canonical_json_bench.py) runs and writes a well-formed result.

Smoke mode only (one run, a few calls): no timing is asserted here, speed is
the bench's own subject.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "canonical_json_bench.py"
INPUTS = Path(__file__).resolve().parents[2] / "protocol" / "bench" / "high-data-inputs.json"
NAMES = ("_canonical_json", "_parse_canonical_json", "_state_digest")
SIZES = ("1 KiB", "16 KiB", "60 KiB")


def _is_stats(value):
    return (
        type(value) is dict
        and set(value) == {"median", "min", "max"}
        and all(type(n) is float and math.isfinite(n) and n > 0 for n in value.values())
        and value["min"] <= value["median"] <= value["max"]
    )


def test_a_smoke_run_writes_a_well_formed_result_without_paths_or_state_data(tmp_path):
    env = {**os.environ, "ODUFLOW_BENCH_MODE": "smoke", "ODUFLOW_BENCH_OUT_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, str(BENCH)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    text = (tmp_path / "canonical-json-python.json").read_text(encoding="utf-8")
    result = json.loads(text)
    assert {key: result[key] for key in ("schema", "id", "item", "mode", "ok")} == {
        "schema": 1,
        "id": "canonical-json-python",
        "item": 1,
        "mode": "smoke",
        "ok": True,
    }
    assert all(type(result[key]) is str and result[key] for key in ("title", "method", "floor"))
    assert sorted(row["label"] for row in result["rows"]) == sorted(
        f"{name}, {size}" for name in NAMES for size in SIZES
    )
    for row in result["rows"]:
        assert row["unit"] == "ms" and row["higher_is_better"] is False and row["runs"] == 1
        assert _is_stats(row["value"]) and _is_stats(row["floor"]) and _is_stats(row["ratio"])
        expected_target = {"kind": "ratio_max", "value": 3} if row["label"].startswith("_state_digest") else None
        assert row["target"] == expected_target
    assert str(BENCH.parents[3]) not in text and str(tmp_path) not in text
    for entry in json.loads(INPUTS.read_text(encoding="utf-8"))["inputs"]:
        for state_id in json.loads(entry["state_data_json"]):
            assert state_id not in text


def test_a_broken_mode_is_refused_without_writing_a_result(tmp_path):
    env = {**os.environ, "ODUFLOW_BENCH_MODE": "fast", "ODUFLOW_BENCH_OUT_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, str(BENCH)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2
    assert list(tmp_path.iterdir()) == []
