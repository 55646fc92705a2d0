"""The protocol helpers of oduflow_job.py, imported by path, without Salt."""

import hashlib
import json
import re

import pytest

from conftest import MODULE_PATH, load_module

m = load_module()

UUID = "0d6f4b3e-8a1c-4f2e-9b7d-3c5a1e2f4d6b"
MINION = "client-" + UUID
JID = "20261129082300245264"
DIGEST = "a" * 64


def code_of(call, *args):
    with pytest.raises(m.ProtocolError) as caught:
        call(*args)
    return caught.value.code


def receipt(**changes):
    value = {
        "protocol": 1,
        "minion_id": MINION,
        "request_id": UUID,
        "jid": JID,
        "profile": "configure",
        "state_digest": "",
        "status": "succeeded",
        "passed": 3,
        "total": 3,
    }
    value.update(changes)
    return value


def test_the_module_version_is_readable_by_the_documented_regex():
    text = MODULE_PATH.read_text()
    found = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    assert found and found.group(1) == m.__version__ == "1.1.1"


def test_the_module_imports_no_salt_at_import_time():
    imports = [line for line in MODULE_PATH.read_text().splitlines() if line.startswith(("import ", "from "))]
    assert imports and not any("salt" in line for line in imports)


# ---------------------------------------------------------------- identities


@pytest.mark.parametrize(
    "value",
    [UUID, "00000000-0000-1000-8000-000000000000", "ffffffff-ffff-8fff-bfff-ffffffffffff"],
)
def test_a_canonical_uuid_is_a_valid_request_id(value):
    assert m._validate_request_id(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        UUID.upper(),
        UUID + "\n",
        " " + UUID,
        UUID.replace("-", ""),
        "0d6f4b3e-8a1c-0f2e-9b7d-3c5a1e2f4d6b",
        "0d6f4b3e-8a1c-9f2e-9b7d-3c5a1e2f4d6b",
        "0d6f4b3e-8a1c-4f2e-7b7d-3c5a1e2f4d6b",
        "0d6f4b3e-8a1c-4f2e-cb7d-3c5a1e2f4d6b",
        "{" + UUID + "}",
        None,
        True,
        12,
        b"0d6f4b3e-8a1c-4f2e-9b7d-3c5a1e2f4d6b",
    ],
)
def test_anything_but_a_canonical_uuid_is_an_invalid_request_id(value):
    assert code_of(m._validate_request_id, value) == "invalid_request_id"


def test_a_client_prefixed_uuid_is_a_valid_minion_id():
    assert m._validate_minion_id(MINION) == MINION


@pytest.mark.parametrize(
    "value", [UUID, "Client-" + UUID, "client-" + UUID + "\n", "client-" + UUID.upper(), "master", None, 1]
)
def test_anything_else_is_an_invalid_minion_id(value):
    assert code_of(m._validate_minion_id, value) == "invalid_minion_id"


def test_twenty_ascii_digits_are_a_valid_jid():
    assert m._validate_jid(JID) == JID


@pytest.mark.parametrize(
    "value",
    [
        JID[:-1],
        JID + "0",
        JID + "\n",
        "٠" * 20,  # noqa: RUF001 - Arabic-Indic digits are the point
        "2026112908230024526a",
        JID + "_1234",
        int(JID),
        None,
    ],
)
def test_anything_but_twenty_ascii_digits_is_an_invalid_jid(value):
    assert code_of(m._validate_jid, value) == "invalid_jid"


def test_profiles_are_the_four_fixed_roles_and_custom():
    for profile in ("configure", "production", "volume_resize", "credentials", "custom"):
        assert m._validate_profile(profile) == profile
    for bad in ("Configure", "highstate", "", None, ["configure"]):
        assert code_of(m._validate_profile, bad) == "invalid_profile"


def test_a_state_digest_must_fit_its_profile():
    assert m._validate_state_digest("configure", "") == ""
    assert m._validate_state_digest("custom", DIGEST) == DIGEST
    for profile, digest in [
        ("configure", DIGEST),
        ("configure", None),
        ("custom", ""),
        ("custom", "A" * 64),
        ("custom", "a" * 63),
        ("custom", None),
    ]:
        assert code_of(m._validate_state_digest, profile, digest) == "invalid_state_digest"


# ------------------------------------------------------------ canonical JSON


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-(2**53 - 1), "-9007199254740991"),
        (2**53 - 1, "9007199254740991"),
        ("", '""'),
        ('q"b\\s/', '"q\\"b\\\\s/"'),
        ("\b\f\n\r\t\x00\x1f\x7f", '"\\b\\f\\n\\r\\t\\u0000\\u001f\x7f"'),
        ("\u2028\u2029é😀", '"\u2028\u2029é😀"'),
        ([], "[]"),
        ({}, "{}"),
        ([1, [2, {}]], "[1,[2,{}]]"),
        ({"b": 1, "a": {"d": [], "c": None}}, '{"a":{"c":null,"d":[]},"b":1}'),
        # UTF-16 order: U+FF61 sorts after U+1F600 (surrogate D83D), unlike code point order.
        ({"\uff61": 1, "😀": 2, "z": 3, "Z": 4, "10": 5, "2": 6}, '{"10":5,"2":6,"Z":4,"z":3,"😀":2,"\uff61":1}'),
    ],
)
def test_values_in_the_domain_serialize_canonically(value, text):
    assert m._canonical_json(value) == text
    assert m._parse_canonical_json(text) == value


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        0.5,
        float("nan"),
        float("inf"),
        2**53,
        -(2**53),
        "\ud800",
        {"\udc00": 1},
        {1: "a"},
        (1, 2),
        b"bytes",
        {"a": {1, 2}},
        [object()],
    ],
)
def test_values_outside_the_domain_are_unsupported(value):
    assert code_of(m._canonical_json, value) == "unsupported_json_value"


def _nested(depth, kind=list):
    value = kind()
    for _ in range(depth - 1):
        value = [value] if kind is list else {"k": value}
    return value


@pytest.mark.parametrize("kind", [list, dict])
def test_canonical_json_nests_at_most_100_levels(kind):
    assert m.MAX_JSON_DEPTH == 100
    text = m._canonical_json(_nested(100, kind))
    assert m._parse_canonical_json(text) == _nested(100, kind)
    assert code_of(m._canonical_json, _nested(101, kind)) == "unsupported_json_value"
    assert code_of(m._parse_canonical_json, "[" + text + "]") == "non_canonical_json"


def test_absurd_nesting_is_refused_by_the_depth_bound_not_by_recursion():
    # 900 levels parse fine under Python's default recursion limit: the bound
    # alone refuses them, as it does in TypeScript.
    assert code_of(m._parse_canonical_json, "[" * 900 + "]" * 900) == "non_canonical_json"
    assert code_of(m._parse_canonical_json, "[" * 200_000 + "]" * 200_000) == "non_canonical_json"
    deep = _nested(5000)
    assert code_of(m._canonical_json, deep) == "unsupported_json_value"
    # Brackets inside strings do not count.
    assert m._parse_canonical_json(json.dumps(["[" * 500])) == ["[" * 500]


def test_a_self_containing_value_is_unsupported_rather_than_a_crash():
    cycle = []
    cycle.append(cycle)
    assert code_of(m._canonical_json, cycle) == "unsupported_json_value"


@pytest.mark.parametrize(
    "text",
    [
        None,
        b"{}",
        "",
        "{",
        " {}",
        "{} ",
        '{"b":1,"a":2}',
        '{"a":1,"a":1}',
        '{"a": 1}',
        "1.0",
        "-0",
        "1e2",
        "9007199254740992",
        "NaN",
        "Infinity",
        '"\\u0041"',
        '"\\/"',
        '"\\ud800"',
        '"\\u00e9"',
        "[" * 5000 + "]" * 5000,
        "1" * 5000,
    ],
)
def test_text_that_is_not_exactly_canonical_is_refused(text):
    assert code_of(m._parse_canonical_json, text) == "non_canonical_json"


# ------------------------------------------------------------ custom high data

HIGH = '{"demo":{"test.succeed_without_changes":[{"name":"demo"}]}}'


def test_the_state_digest_is_the_sha256_of_the_received_text():
    assert m._state_digest(HIGH) == hashlib.sha256(HIGH.encode()).hexdigest()


def test_both_state_body_forms_are_accepted():
    text = '{"a":{"file":["managed",{"name":"/tmp/x"}]},"b":{"test.nop":[]}}'
    assert m._parse_high_data(text) == (json.loads(text), hashlib.sha256(text.encode()).hexdigest())


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (None, "invalid_high_data"),
        ({"a": {"b": []}}, "invalid_high_data"),
        ('{"a":{"b":["' + "x" * 65536 + '"]}}', "high_data_too_large"),
        ('{"a":{"b":["' + "\ud800" * 21846 + '"]}}', "high_data_too_large"),
        ('{"a":{"b":' + "[" * 31 + "]" * 31 + "}}", "high_data_too_deep"),
        ('{"a":{"b":[' + "{" * 40 + "]}}", "high_data_too_deep"),
        ('{"a": {"b": []}}', "non_canonical_json"),
        ('{"a":{"b":[1.5]}}', "non_canonical_json"),
        ('{"__env__":{"b":[]}}', "forbidden_key"),
        ('{"a":{"b":[{"__pub_jid":"1"}]}}', "forbidden_key"),
        ('{"a":{"b":[{"parallel":true}]}}', "forbidden_key"),
        ('{"a":{"b":[[{"__x":1}]]}}', "forbidden_key"),
        ("[]", "invalid_high_data"),
        ("{}", "invalid_high_data"),
        ('{"a":[]}', "invalid_high_data"),
        ('{"a":{}}', "invalid_high_data"),
        ('{"a":{"b":{}}}', "invalid_high_data"),
        ('{"a":{"b":[],"c":"d"}}', "invalid_high_data"),
    ],
)
def test_high_data_is_refused_by_the_first_failing_check(text, code):
    assert code_of(m._state_digest, text) == code


def test_exactly_64_kib_of_high_data_is_accepted():
    prefix, suffix = '{"a":{"b":["', '"]}}'
    text = prefix + "x" * (65536 - len(prefix) - len(suffix)) + suffix
    assert len(text.encode()) == 65536
    assert len(m._state_digest(text)) == 64


def test_depth_32_is_accepted_and_brackets_inside_strings_do_not_count():
    text = '{"a":{"b":' + "[" * 30 + '"[[[{{{\\"]]]"' + "]" * 30 + "}}"
    assert m._text_nesting_depth(text) == 32
    assert len(m._state_digest(text)) == 64


def test_an_escaped_backslash_ends_before_the_closing_quote():
    assert m._text_nesting_depth('["\\\\",[1]]') == 2


def test_fixed_profiles_take_no_state_data():
    assert m._check_state_data("configure", "") == (None, "")
    for bad in ("{}", HIGH, None):
        assert code_of(m._check_state_data, "configure", bad) == "invalid_high_data"
    value, digest = m._check_state_data("custom", HIGH)
    assert value == {"demo": {"test": [{"name": "demo"}, "succeed_without_changes"]}}
    assert digest == m._state_digest(HIGH)


def test_dotted_state_declarations_are_rewritten_the_way_the_sls_compiler_does():
    high = {
        "a": {"cmd.run": [{"name": "x"}]},
        "b": {"file": ["managed", {"name": "y"}], "pkg.installed.extra": []},
    }
    assert m._state_high_data(high) == {
        "a": {"cmd": [{"name": "x"}, "run"]},
        "b": {"file": ["managed", {"name": "y"}], "pkg": ["installed.extra"]},
    }


@pytest.mark.parametrize(
    "text",
    [
        '{"a":{"file":["absent"],"file.managed":[]}}',
        '{"a":{"file.absent":[],"file.managed":[]}}',
        '{"a":{"cmd.run":[{"name":"x"}],"cmd.wait":[{"name":"y"}]}}',
        '{"a":{"file.managed":[],"file.x.y":[]}}',
        '{"a":{"pkg":["installed"]},"b":{"service.dead":[],"service.running":[]}}',
    ],
)
def test_a_state_declaring_one_module_twice_is_refused_before_any_digest_exists(text):
    # The master computes the digest before it publishes; a body the minion
    # cannot run must fail there, not on the minion after publication.
    assert code_of(m._state_digest, text) == "invalid_high_data"
    assert code_of(m._check_state_data, "custom", text) == "invalid_high_data"


def _random_state_bodies(count, seed=20261129):
    import random

    rng = random.Random(seed)
    keys = ["file", "file.managed", "file.absent", "filex.y", "cmd.run", "cmd.wait", "cmd", "a.b.c", "a", ".x", "x."]
    for _ in range(count):
        high = {}
        for state in range(rng.randint(1, 3)):
            chosen = rng.sample(keys, rng.randint(1, 3))
            high[f"s{state}"] = {key: ([rng.choice(["run", "managed"])] if "." not in key else []) for key in chosen}
        yield m._canonical_json(high)


def test_run_never_refuses_high_data_that_the_digest_accepted():
    """_state_high_data's own duplicate check can never fire after _state_digest passed."""
    accepted = refused = 0
    for text in _random_state_bodies(400):
        try:
            digest = m._state_digest(text)
        except m.ProtocolError as refusal:
            code = refusal.code
        else:
            code = None
        if code is not None:
            assert code == "invalid_high_data"
            refused += 1
            continue
        accepted += 1
        high, checked_digest = m._check_state_data("custom", text)
        assert checked_digest == digest and len(high) == len(json.loads(text))
    assert accepted > 50 and refused > 50


# ------------------------------------------------------------------ reduction


@pytest.mark.parametrize(
    ("ret", "expected"),
    [
        ({"a": {"result": True}, "b": {"result": True}}, ("succeeded", 2, 2)),
        ({"a": {"result": True}, "b": {"result": False}}, ("failed", 1, 2)),
        ({"a": {"result": False}}, ("failed", 0, 1)),
        ({"a": {"result": None}}, ("unknown", 0, 0)),
        ({"a": {"result": False}, "b": {"result": None}}, ("unknown", 0, 0)),
        ({"a": {"result": 1}}, ("unknown", 0, 0)),
        ({"a": {"result": "True"}}, ("unknown", 0, 0)),
        ({"a": {"comment": "no result"}}, ("unknown", 0, 0)),
        ({"a": "Rendering failed"}, ("unknown", 0, 0)),
        ({}, ("unknown", 0, 0)),
        (["Rendering SLS 'base:roles.x' failed"], ("unknown", 0, 0)),
        ("'state.sls' is not available.", ("unknown", 0, 0)),
        (None, ("unknown", 0, 0)),
        (5, ("unknown", 0, 0)),
    ],
)
def test_only_proof_reduces_to_a_verdict(ret, expected):
    status, passed, total = expected
    assert m._reduce_state_result(ret) == {"status": status, "passed": passed, "total": total}


def test_ordered_mappings_from_salt_reduce_like_dicts():
    from collections import OrderedDict

    ret = OrderedDict(a=OrderedDict(result=True))
    assert m._reduce_state_result(ret)["status"] == "succeeded"


# ----------------------------------------------------- receipts and answers


def test_a_valid_receipt_is_returned_unchanged():
    value = receipt()
    assert m._validate_receipt(value) is value
    assert m._validate_receipt(value, {"jid": JID, "profile": "configure"}) is value
    custom = receipt(profile="custom", state_digest=DIGEST, status="failed", passed=0, total=2)
    assert m._validate_receipt(custom, {"state_digest": DIGEST}) is custom
    assert m._validate_receipt(receipt(status="unknown", passed=0, total=0)) is not None


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        {k: v for k, v in receipt().items() if k != "total"},
        {**receipt(), "extra": 1},
        receipt(protocol=True),
        receipt(protocol=1.0),
        receipt(protocol=2),
        receipt(minion_id=UUID),
        receipt(request_id=UUID.upper()),
        receipt(jid=int(JID)),
        receipt(profile="highstate"),
        receipt(profile=["configure"]),
        receipt(state_digest=DIGEST),
        receipt(profile="custom", state_digest=""),
        receipt(status="running", passed=0, total=0),
        receipt(status="not_started", passed=0, total=0),
        receipt(status=["succeeded"]),
        receipt(passed=True, total=1),
        receipt(passed=2, total=3),
        receipt(passed=3.0),
        receipt(passed=-1, total=-1),
        receipt(passed=2**53, total=2**53),
        receipt(status="succeeded", passed=0, total=0),
        receipt(status="failed", passed=0, total=0),
        receipt(status="failed", passed=2, total=2),
        receipt(status="unknown", passed=0, total=1),
        receipt(status="unknown", passed=1, total=1),
    ],
)
def test_a_receipt_outside_the_schema_is_invalid(value):
    assert code_of(m._validate_receipt, value) == "invalid_receipt"


@pytest.mark.parametrize("field", ["minion_id", "request_id", "jid", "profile", "state_digest"])
def test_a_receipt_bound_to_another_request_is_a_conflict(field):
    other = {
        "minion_id": "client-" + UUID.replace("0d6f", "1d6f"),
        "request_id": UUID.replace("0d6f", "1d6f"),
        "jid": "2" * 20,
        "profile": "production",
        "state_digest": DIGEST,
    }
    assert code_of(m._validate_receipt, receipt(), {field: other[field]}) == "binding_conflict"


def test_a_misspelt_binding_key_is_a_programming_error():
    with pytest.raises(TypeError):
        m._validate_receipt(receipt(), {"jid ": JID})


@pytest.mark.parametrize("status", ["not_started", "running", "unknown"])
def test_a_status_answer_may_also_be_not_started_or_running(status):
    value = receipt(status=status, passed=0, total=0)
    assert m._validate_status_answer(value, {"request_id": UUID}) is value


def test_a_status_answer_outside_the_schema_is_invalid_and_a_foreign_one_conflicts():
    assert code_of(m._validate_status_answer, receipt(status="running", total=1), {}) == "invalid_status_answer"
    assert code_of(m._validate_status_answer, receipt(status="queued"), {}) == "invalid_status_answer"
    assert code_of(m._validate_status_answer, receipt(), {"jid": "1" * 20}) == "binding_conflict"


def test_error_messages_never_repeat_the_offending_input():
    secret = "hunter2-secret"
    for call, args in [
        (m._validate_request_id, (secret,)),
        (m._validate_jid, (secret,)),
        (m._parse_canonical_json, (secret,)),
        (m._state_digest, ('{"' + secret + '":[]}',)),
        (m._validate_receipt, ({**receipt(), secret: 1},)),
        (m._validate_receipt, (receipt(), {"jid": secret})),
    ]:
        with pytest.raises(m.ProtocolError) as caught:
            call(*args)
        assert secret not in str(caught.value) and secret not in caught.value.message
