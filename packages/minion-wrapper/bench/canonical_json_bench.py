"""Issue 12 item 1 (Python): oduflow_job's canonical JSON, validation and digest.

``_canonical_json``, ``_parse_canonical_json`` and ``_state_digest`` on
realistic custom high data of 1, 16 and 60 KiB, each against its floor, the
standard library's native work on the same text in the same process,
interleaved run by run:

- ``_canonical_json(value)``       vs ``json.dumps(value)``
- ``_parse_canonical_json(text)``  vs ``json.dumps(json.loads(text))``
- ``_state_digest(text)``          vs those plus ``hashlib.sha256`` of the text

(``json.dumps`` with ``ensure_ascii=False, separators=(",", ":")``, the text's
own shape; ``value`` is the parsed text.) The inputs are
``packages/protocol/bench/high-data-inputs.json``, the very bytes the
TypeScript bench measures. Writes ``.test-results/bench/canonical-json-python.json``
(the result contract of issue 12), or into ``ODUFLOW_BENCH_OUT_DIR`` when
set. ``ODUFLOW_BENCH_MODE``: smoke (1 run, a few calls), default, full.
Standard library only; the module is imported by path, without Salt, the way
the tests import it. Run: ``npm run bench`` in packages/minion-wrapper.
"""

import gc
import hashlib
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
MODULE_PATH = PACKAGE_DIR / "salt" / "_modules" / "oduflow_job.py"
INPUTS_PATH = PACKAGE_DIR.parent / "protocol" / "bench" / "high-data-inputs.json"
DEFAULT_OUT_DIR = PACKAGE_DIR.parents[1] / ".test-results" / "bench"
RESULT_ID = "canonical-json-python"

RUNS = {"smoke": 1, "default": 9, "full": 21}
BATCH_SECONDS = {"smoke": 0.002, "default": 0.04, "full": 0.08}
TARGET_RATIO = 3


def _load_module():
    spec = importlib.util.spec_from_file_location("oduflow_job_bench", MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stats(samples):
    def round4(number):
        return float(f"{number:.4g}")

    return {"median": round4(statistics.median(samples)), "min": round4(min(samples)), "max": round4(max(samples))}


def _calibrate(fn, batch_seconds):
    """Calls per batch so that a batch lasts about ``batch_seconds`` (at least 3 calls)."""
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= batch_seconds / 4 or calls >= 1 << 20:
            return max(3, int(calls * batch_seconds / max(elapsed, 1e-6)) + 1)
        calls *= 2


def _batch(fn, calls):
    """Mean milliseconds per call over one batch."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) * 1000 / calls


def _cases(job, entry):
    text = entry["state_data_json"]
    value = json.loads(text)

    def dumps(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def digest_floor():
        dumps(json.loads(text))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    label = entry["label"]
    return [
        (f"_canonical_json, {label}", lambda: job._canonical_json(value), lambda: dumps(value), None),
        (f"_parse_canonical_json, {label}", lambda: job._parse_canonical_json(text), lambda: dumps(json.loads(text)), None),
        (f"_state_digest, {label}", lambda: job._state_digest(text), digest_floor, {"kind": "ratio_max", "value": TARGET_RATIO}),
    ]


def _read_inputs(job):
    inputs = json.loads(INPUTS_PATH.read_text(encoding="utf-8"))["inputs"]
    for entry in inputs:
        text = entry["state_data_json"]
        # The inputs are what they claim to be, and valid high data (every call below takes its success path).
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != entry["sha256"]:
            raise RuntimeError(f"input {entry['label']}: sha256 differs")
        if job._state_digest(text) != entry["sha256"]:
            raise RuntimeError(f"input {entry['label']}: _state_digest differs")
        if job._canonical_json(job._parse_canonical_json(text)) != text:
            raise RuntimeError(f"input {entry['label']}: not canonical")
    return inputs


def _measure(job, inputs, mode):
    runs, batch_seconds = RUNS[mode], BATCH_SECONDS[mode]
    plan = [
        (label, value_fn, floor_fn, target, _calibrate(value_fn, batch_seconds), _calibrate(floor_fn, batch_seconds))
        for entry in inputs
        for label, value_fn, floor_fn, target in _cases(job, entry)
    ]
    samples = [([], [], []) for _ in plan]
    for run in range(runs):
        gc.collect()
        for (_label, value_fn, floor_fn, _target, value_calls, floor_calls), (values, floors, ratios) in zip(plan, samples):
            # Alternate which side goes first, so neither always runs on a warmer cache.
            if run % 2:
                floor = _batch(floor_fn, floor_calls)
                value = _batch(value_fn, value_calls)
            else:
                value = _batch(value_fn, value_calls)
                floor = _batch(floor_fn, floor_calls)
            values.append(value)
            floors.append(floor)
            ratios.append(value / floor)
    rows = []
    for (label, _value_fn, _floor_fn, target, _vc, _fc), (values, floors, ratios) in zip(plan, samples):
        row = {
            "label": label,
            "unit": "ms",
            "value": _stats(values),
            "floor": _stats(floors),
            "ratio": _stats(ratios),
            "higher_is_better": False,
            "runs": runs,
            "target": target,
        }
        if target is not None:
            row["met"] = row["ratio"]["median"] <= target["value"]
        rows.append(row)
    return rows


def _base(mode):
    runs, batch_ms = RUNS[mode], BATCH_SECONDS[mode] * 1000
    return {
        "schema": 1,
        "id": RESULT_ID,
        "item": 1,
        "title": "Canonical JSON, validation and digest (Python)",
        "method": (
            "oduflow_job.py's _canonical_json, _parse_canonical_json and _state_digest (imported by path, "
            f"without Salt) under CPython {sys.version_info[0]}.{sys.version_info[1]} on realistic custom high data "
            "of 1, 16 and 60 KiB (file.managed with config bodies, pkg.installed, service with watch, "
            "user.present, cmd.run, non-ASCII; the texts of packages/protocol/bench/high-data-inputs.json, "
            "the same bytes the TypeScript bench measures), in one process. Per run, every row measures the "
            "call and its floor back to back (which goes first alternates by run), each as the mean of a "
            f"batch of about {batch_ms:g} ms of calls; {runs} runs, gc.collect() between runs; the ratio is "
            "value / floor per run. CPU only, no I/O."
        ),
        "floor": (
            "The standard library's native work on the same text in the same run: json.dumps(value) for "
            "_canonical_json, json.loads(text) + json.dumps for _parse_canonical_json, and those plus "
            "hashlib.sha256 of the text for _state_digest (json.dumps with ensure_ascii=False and compact "
            "separators)."
        ),
        "mode": mode,
        "chart": None,
    }


def _write(out_dir, result):
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{RESULT_ID}.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main():
    mode = os.environ.get("ODUFLOW_BENCH_MODE", "default")
    if mode not in RUNS:
        print("ODUFLOW_BENCH_MODE must be smoke, default or full", file=sys.stderr)
        return 2
    out_dir = Path(os.environ.get("ODUFLOW_BENCH_OUT_DIR") or DEFAULT_OUT_DIR)
    base = _base(mode)
    try:
        job = _load_module()
        rows = _measure(job, _read_inputs(job), mode)
    except Exception:
        _write(out_dir, {**base, "rows": [], "notes": ["the run threw before it measured every row"], "ok": False})
        raise
    missed = [row["label"] for row in rows if row.get("met") is False]
    notes = ["Only _state_digest carries a target (≤ 3× its floor); the other rows are reported."]
    if missed:
        notes.append("Target missed: " + "; ".join(missed) + ".")
    _write(out_dir, {**base, "rows": rows, "notes": notes, "ok": True})
    for row in rows:
        ratio = row["ratio"]
        print(
            f"{row['label']:<36} {row['value']['median']:.4f} ms  floor {row['floor']['median']:.4f} ms  "
            f"ratio {ratio['median']:.2f} ({ratio['min']:.2f}-{ratio['max']:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
