"""Runs every shared fixture case against oduflow_job.py's protocol helpers.

The TypeScript runner (src/conformance.test.ts) runs the same files against
@oduflow/protocol; together they keep both languages byte-compatible. One
test per case id. ``transitions.json`` is master-only and not loaded here.
``capabilities`` cases (module 1.1.0) run through ``_validate_capabilities``;
``status_answer`` cases include ``refused`` answers. Cases marked
``"python": false`` are skipped with a reason (pytest -ra lists
them). The module is imported by path, without Salt.
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1]
FIXTURE_DIR = HARNESS / "fixtures"
MODULE_PATH = HARNESS.parent / "minion-wrapper" / "salt" / "_modules" / "oduflow_job.py"
MASTER_ONLY = {"transitions.json"}
# Categories the Python module implements that must have cases in the corpus.
REQUIRED_CATEGORIES = {
    "identity",
    "canonical_json",
    "high_data",
    "reduction",
    "receipt",
    "status_answer",
    "capabilities",
}
# Categories the corpus may hold beyond those (none today).
OPTIONAL_CATEGORIES = set()
# The corpus holds values nested 2000 deep (refused by the module's own
# MAX_JSON_DEPTH); Python's C JSON decoder counts them against the recursion limit.
FIXTURE_RECURSION_LIMIT = 10_000


def _load_module():
    spec = importlib.util.spec_from_file_location("oduflow_job_conformance", MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


job = _load_module()


def _identity(case_input):
    validators = {
        "request_id": job._validate_request_id,
        "minion_id": job._validate_minion_id,
        "jid": job._validate_jid,
    }
    return validators[case_input["kind"]](case_input["value"])


def _canonical_json(case_input):
    if case_input["op"] == "serialize":
        return job._canonical_json(case_input["value"])
    if case_input["op"] == "parse":
        return job._parse_canonical_json(case_input["text"])
    raise AssertionError(f"unknown canonical_json op {case_input['op']!r}")


CALLS = {
    "identity": _identity,
    "canonical_json": _canonical_json,
    "high_data": lambda i: job._state_digest(i["state_data_json"]),
    "reduction": lambda i: job._reduce_state_result(i["state_return"]),
    "receipt": lambda i: job._validate_receipt(i["receipt"], i.get("binding")),
    "status_answer": lambda i: job._validate_status_answer(i["answer"], i["binding"]),
    "capabilities": lambda i: job._validate_capabilities(i["answer"]),
}


def _load_corpus_file(path):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, FIXTURE_RECURSION_LIMIT))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    finally:
        sys.setrecursionlimit(limit)


def _collect_cases():
    cases = []
    for path in sorted(FIXTURE_DIR.glob("*.json")):
        if path.name in MASTER_ONLY or path.name.endswith(".schema.json"):
            continue
        corpus = _load_corpus_file(path)
        for case in corpus["cases"]:
            cases.append(pytest.param(corpus["category"], case, id=case["id"]))
    return cases


CASES = _collect_cases()


def _strict_json(value):
    """A JSON rendering that tells true from 1 and 1 from 1.0."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def test_the_corpus_is_present_and_covers_every_python_category():
    """A wrong corpus path or an emptied corpus must fail, never skip the suite silently."""
    assert FIXTURE_DIR.is_dir(), f"fixture corpus not found at {FIXTURE_DIR}"
    assert CASES, f"fixture corpus at {FIXTURE_DIR} has no cases"
    categories = {param.values[0] for param in CASES}
    assert categories >= REQUIRED_CATEGORIES, f"corpus categories {sorted(categories)}"
    assert categories <= REQUIRED_CATEGORIES | OPTIONAL_CATEGORIES, (
        f"no Python call for {sorted(categories - set(CALLS))}"
    )


def test_every_case_id_is_unique_across_the_corpus():
    ids = [param.id for param in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(("category", "case"), CASES)
def test_the_python_module_agrees_with_the_fixture(category, case):
    if case.get("python") is False:
        pytest.skip("case is marked python: false (its input cannot be represented identically in Python)")
    assert ("expect" in case) != ("error" in case), "a case has exactly one of expect or error"
    assert category in CALLS, f"no Python call for category {category!r}"
    call = CALLS[category]
    if "error" in case:
        with pytest.raises(job.ProtocolError) as caught:
            call(case["input"])
        assert caught.value.code == case["error"]
    else:
        assert _strict_json(call(case["input"])) == _strict_json(case["expect"])
