"""The native quick paths of oduflow_job.py's canonical JSON agree with its exact definitions.

``_canonical_json``, ``_parse_canonical_json`` and ``_state_digest`` let the
``json`` module do the work and fall back to the exact serializer only when a
quick test cannot decide; the depth scan runs in C. Each is checked here
against the definition it replaces, on seeded random inputs built to hit the
cases where the quick path and the definition could part: astral keys,
surrogates, escapes, integer-like keys, huge numbers, backslashes outside
strings, subclasses of the JSON types.
"""

import collections
import contextlib
import enum
import json
import random

import pytest

from conftest import load_module

m = load_module()
SEED = 20_261_202


def outcome(call, *args):
    try:
        return ("ok", call(*args))
    except m.ProtocolError as exc:
        return ("error", exc.code)


def reference_depth(text):
    """The scanner as docs/protocol-rules.md states it, one character at a time."""
    depth = max_depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            max_depth = max(max_depth, depth)
        elif char in "]}":
            depth -= 1
    return max_depth


def reference_serialize(value):
    """The per-leaf serializer: the definition of the canonical bytes."""
    parts = []
    try:
        m._emit_canonical(value, parts, 0)
    except RecursionError:
        raise m.ProtocolError("unsupported_json_value", "") from None
    return "".join(parts)


def reference_parse(text):
    if reference_depth(text) > m.MAX_JSON_DEPTH:
        raise m.ProtocolError("non_canonical_json", "")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise m.ProtocolError("non_canonical_json", "") from None
    try:
        canonical = reference_serialize(value)
    except m.ProtocolError:
        raise m.ProtocolError("non_canonical_json", "") from None
    if canonical != text:
        raise m.ProtocolError("non_canonical_json", "")
    return value


UNITS = [
    "[",
    "]",
    "{",
    "}",
    '"',
    "\\",
    "a",
    ",",
    ":",
    "1",
    "-",
    ".",
    "e",
    " ",
    "é",
    "\ud800",
    "😀",
    "\uff61",
    "\n",
    "_",
]
KEYS = ["a", "b", "10", "9", "😀", "\uff61", "\ue000", "é", "__x", "parallel", "\\ud800", '"', "\\"]
LEAVES = [
    None,
    True,
    False,
    0,
    -1,
    2**53 - 1,
    -(2**53 - 1),
    2**53,
    "x",
    "😀",
    "\ud800",
    '\\"[',
    "\u2028",
    "\x7f",
    "\x00",
]


def random_value(rng, depth=0):
    roll = rng.random()
    if depth > 4 or roll < 0.35:
        return rng.choice(LEAVES)
    if roll < 0.6:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = [rng.choice(KEYS) + rng.choice(["", "1", "😀"]) for _ in range(rng.randint(0, 4))]
    return {key: random_value(rng, depth + 1) for key in keys}


def test_the_depth_scan_agrees_with_the_scan_one_character_at_a_time():
    rng = random.Random(SEED)
    for _ in range(20_000):
        text = "".join(rng.choice(UNITS) for _ in range(rng.randint(0, 40)))
        assert m._text_nesting_depth(text) == reference_depth(text), text


def _first_backslash_outside_strings(text):
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == "\\":
            return index
        elif char == '"':
            in_string = True
    return len(text)


def test_the_nesting_bound_is_exact_on_json_and_bounds_any_text_up_to_where_a_parser_stops():
    rng = random.Random(SEED)
    for _ in range(20_000):
        text = "".join(rng.choice(UNITS) for _ in range(rng.randint(0, 40)))
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            assert m._nesting_bound(text, 100) == reference_depth(text), text
        # Up to the first backslash outside a string (where every JSON parser stops) the bound is never below the depth.
        prefix = reference_depth(text[: _first_backslash_outside_strings(text)])
        assert m._nesting_bound(text, 5) >= min(prefix, 6), text
    for value in (random_value(rng) for _ in range(3000)):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        assert m._nesting_bound(text, 100) == reference_depth(text) == m._text_nesting_depth(text)


def test_serialize_agrees_with_the_per_leaf_serializer():
    rng = random.Random(SEED)
    for _ in range(5000):
        value = random_value(rng)
        assert outcome(m._canonical_json, value) == outcome(reference_serialize, value), repr(value)


class _Number(enum.IntEnum):
    ONE = 1


class _Text(str):
    pass


class _List(list):
    pass


@pytest.mark.parametrize(
    "value",
    [
        collections.OrderedDict(a=1),
        collections.defaultdict(list),
        {"a": _Number.ONE},
        [_Text("x")],
        {_Text("k"): 1},
        _List([1]),
        {"a": (1, 2)},
        {True: 1},
        {None: 1},
        [[[1.5]]],
    ],
)
def test_subclasses_and_look_alikes_of_the_json_types_stay_outside_the_domain(value):
    assert outcome(reference_serialize, value) == ("error", "unsupported_json_value")
    assert outcome(m._canonical_json, value) == ("error", "unsupported_json_value")


def test_parse_agrees_with_byte_equality_on_canonical_texts_and_their_near_misses():
    rng = random.Random(SEED)
    edits = ["", " ", "\\ud800", "\\\\", '\\"', '"', "1.0", "-0", "[", "]", "{", "}", ",", '"10":1', '"9":1', "e2"]
    edits.append("9007199254740992")
    for _ in range(5000):
        value = random_value(rng)
        texts = [json.dumps(value, ensure_ascii=rng.random() < 0.3, separators=(",", ":"))]
        with contextlib.suppress(m.ProtocolError):
            texts.append(reference_serialize(value))
        base = texts[-1]
        at = rng.randint(0, len(base))
        texts.append(base[:at] + rng.choice(edits) + base[at + rng.randint(0, 2) :])
        for text in texts:
            assert outcome(m._parse_canonical_json, text) == outcome(reference_parse, text), text


def test_the_state_digest_takes_the_depth_first_even_where_the_parser_stops_early():
    # A backslash outside any string escapes nothing: the two quotes after it are an empty string.
    assert outcome(m._state_digest, '\\""' + "[" * 33) == ("error", "high_data_too_deep")
    assert outcome(m._state_digest, '\\""' + "[" * 32) == ("error", "non_canonical_json")
    assert outcome(m._parse_canonical_json, '\\""' + "[" * 101) == ("error", "non_canonical_json")


def test_forbidden_keys_are_found_with_or_without_reserved_words_elsewhere_in_the_text():
    assert outcome(m._state_digest, '{"s":{"cmd.run":[{"name":"__env__"},"parallel"]}}')[0] == "ok"
    assert outcome(m._state_digest, '{"s":{"cmd.run":[{"a":[{"__x":1}]}]}}') == ("error", "forbidden_key")
    assert outcome(m._state_digest, '{"s":{"cmd.run":[{"parallel":1}]}}') == ("error", "forbidden_key")


def test_a_state_declaring_two_functions_of_one_module_is_refused_only_when_it_does():
    assert outcome(m._state_digest, '{"s":{"cmd.run":[],"file.managed":[]}}')[0] == "ok"
    assert outcome(m._state_digest, '{"s":{"cmd.run":[],"cmd.wait":[]}}') == ("error", "invalid_high_data")
    assert outcome(m._state_digest, '{"s":{"cmd.run":[],"pkg":{}}}') == ("error", "invalid_high_data")
