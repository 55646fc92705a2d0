"""The Python side of the differential fuzzer (src/fuzz/): one long-lived process.

Started once per fuzz run with the path of ``oduflow_job.py`` as its only
argument. It reads batches from stdin, one JSON array per line, each item
``[category, input]`` (a fixture category and its ``input``, as in
fixtures/README.md), and answers each batch with one JSON array per line, an
outcome per item, in order:

- ``["ok", <the canonical JSON text of the result>]``, or for a result
  outside the canonical domain (a validated answer holding a lone surrogate)
  ``"~"`` and ``_strict_json`` of it, which src/fuzz/outcome.ts writes alike
- ``["error", <ProtocolError code>]``
- ``["crash", <exception type name>]`` (anything else: always a finding)

The calls are exactly those of test_conformance.py, the corpus runner; the
TypeScript fuzz suite holds this file to it by running the whole corpus
through it. The module is imported by path, without Salt. Nothing is written
to stderr unless the process itself fails.
"""

import importlib.util
import json
import sys

# Fuzz inputs nest a little past MAX_JSON_DEPTH (100) inside the batch line.
RECURSION_LIMIT = 10_000


def _load_module(path):
    spec = importlib.util.spec_from_file_location("oduflow_job_fuzz", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _calls(job):
    def identity(case_input):
        validators = {
            "request_id": job._validate_request_id,
            "minion_id": job._validate_minion_id,
            "jid": job._validate_jid,
        }
        return validators[case_input["kind"]](case_input["value"])

    def canonical_json(case_input):
        if case_input["op"] == "serialize":
            return job._canonical_json(case_input["value"])
        return job._parse_canonical_json(case_input["text"])

    return {
        "identity": identity,
        "canonical_json": canonical_json,
        "high_data": lambda i: job._state_digest(i["state_data_json"]),
        "reduction": lambda i: job._reduce_state_result(i["state_return"]),
        "receipt": lambda i: job._validate_receipt(i["receipt"], i.get("binding")),
        "status_answer": lambda i: job._validate_status_answer(i["answer"], i["binding"]),
        "capabilities": lambda i: job._validate_capabilities(i["answer"]),
    }


def _outcome(job, call, case_input):
    try:
        result = call(case_input)
    except job.ProtocolError as exc:
        return ["error", exc.code]
    except Exception as exc:  # noqa: BLE001 - every other exception is a finding, reported by type
        return ["crash", type(exc).__name__]
    try:
        # The result's bytes, in the module's own canonical form.
        return ["ok", job._canonical_json(result)]
    except job.ProtocolError:
        return ["ok", "~" + _strict_json(result)]


def _strict_json(value):
    """Keys in UTF-16 order, strings ASCII-escaped; a float keeps its ``.0``, so it never matches an int."""
    if type(value) is dict:
        items = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be", "surrogatepass"))
        return "{" + ",".join(json.dumps(key) + ":" + _strict_json(child) for key, child in items) + "}"
    if type(value) is list:
        return "[" + ",".join(_strict_json(child) for child in value) + "]"
    return json.dumps(value)


def main():
    sys.setrecursionlimit(RECURSION_LIMIT)
    job = _load_module(sys.argv[1])
    calls = _calls(job)
    out = sys.stdout
    for line in sys.stdin.buffer:
        batch = json.loads(line)
        answers = []
        for category, case_input in batch:
            call = calls.get(category)
            answers.append(["crash", "unknown_category"] if call is None else _outcome(job, call, case_input))
        # ASCII only: a lone surrogate could not cross the pipe as UTF-8.
        out.write(json.dumps(answers, ensure_ascii=True) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
