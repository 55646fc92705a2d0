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
# CPU time per side and run, split into CHUNKS chunks that alternate with the other side's.
BATCH_SECONDS = {"smoke": 0.002, "default": 0.04, "full": 0.08}
CHUNKS = {"smoke": 2, "default": 8, "full": 8}
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


def _calibrate(fn, chunk_seconds):
    """Calls per chunk so that a chunk lasts about ``chunk_seconds`` of CPU time (at least one call)."""
    calls = 1
    while True:
        start = time.process_time()
        for _ in range(calls):
            fn()
        elapsed = time.process_time() - start
        if elapsed >= chunk_seconds / 4 or calls >= 1 << 20:
            return max(1, int(calls * chunk_seconds / max(elapsed, 1e-6)) + 1)
        calls *= 2


def _chunk(fn, calls):
    """CPU seconds of ``calls`` calls: what the code costs, not how often the shared machine let it run."""
    start = time.process_time()
    for _ in range(calls):
        fn()
    return time.process_time() - start


def _paired_run(value_fn, floor_fn, value_calls, floor_calls, chunks):
    """Mean CPU ms per call of each side over ``chunks`` pairs of chunks, the order alternating pair by pair."""
    value = floor = 0.0
    for pair in range(chunks):
        if pair % 2 == 0:
            value += _chunk(value_fn, value_calls)
            floor += _chunk(floor_fn, floor_calls)
        else:
            floor += _chunk(floor_fn, floor_calls)
            value += _chunk(value_fn, value_calls)
    return value * 1000 / (value_calls * chunks), floor * 1000 / (floor_calls * chunks)


def _cases(job, entry):
    text = entry["state_data_json"]
    value = json.loads(text)

    def dumps(value):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def digest_floor():
        dumps(json.loads(text))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def parse_floor():
        return dumps(json.loads(text))

    label = entry["label"]
    target = {"kind": "ratio_max", "value": TARGET_RATIO}
    return [
        (f"_canonical_json, {label}", lambda: job._canonical_json(value), lambda: dumps(value), None),
        (f"_parse_canonical_json, {label}", lambda: job._parse_canonical_json(text), parse_floor, None),
        (f"_state_digest, {label}", lambda: job._state_digest(text), digest_floor, target),
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
    runs, chunks = RUNS[mode], CHUNKS[mode]
    chunk_seconds = BATCH_SECONDS[mode] / chunks
    plan = [
        (label, value_fn, floor_fn, target, _calibrate(value_fn, chunk_seconds), _calibrate(floor_fn, chunk_seconds))
        for entry in inputs
        for label, value_fn, floor_fn, target in _cases(job, entry)
    ]
    samples = [([], [], []) for _ in plan]
    # One discarded run first (smoke mode aside): every path warmed up before anything counts.
    for run in range(-1 if runs > 1 else 0, runs):
        gc.collect()
        for (_label, value_fn, floor_fn, _target, value_calls, floor_calls), (values, floors, ratios) in zip(
            plan, samples, strict=True
        ):
            value, floor = _paired_run(value_fn, floor_fn, value_calls, floor_calls, chunks)
            if run < 0:
                continue
            values.append(value)
            floors.append(floor)
            ratios.append(value / floor)
    rows = []
    for (label, _value_fn, _floor_fn, target, _vc, _fc), (values, floors, ratios) in zip(plan, samples, strict=True):
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
            "user.present, cmd.run, non-ASCII; the seeded texts of high-data-inputs.json, the same bytes the "
            "TypeScript bench measures), in one process. Per run, every row measures the "
            f"call and its floor in {CHUNKS[mode]} alternating pairs of chunks (which goes first alternates pair "
            f"by pair), about {batch_ms:g} ms of calls per side; the time is CPU time of the process "
            "(time.process_time), so moments when the shared machine ran something else count for neither side. "
            f"{runs} runs after a discarded warm-up run, gc.collect() between runs; the ratio is value / floor per "
            "run. CPU only, no I/O."
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
    text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    (out_dir / f"{RESULT_ID}.json").write_text(text, encoding="utf-8")


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
    notes = ["Only _state_digest carries a target (at most 3 times its floor); the other rows are reported."]
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
