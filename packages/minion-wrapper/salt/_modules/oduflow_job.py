"""
oduflow_job: managed state applies with durable, JID-bound minion receipts.

Protocol 1, module 1.1.1 (docs/wire-contract.md, docs/protocol-rules.md). The
master publishes ``oduflow_job.run(request_id, profile, state_data_json)`` once
under a JID it chose and persisted; this module claims the publication on
disk, runs the state, and commits a reduced receipt before control returns to
Salt, so the outcome survives a return that Salt loses on its way to the
master. ``oduflow_job.status`` reads that evidence back.

Salt-callable functions:

- ``capabilities()``: ``{"protocol", "module_version", "salt_version",
  "module_sha256", "ready", "reasons"}``; ``ready`` is true exactly when no
  readiness check failed (``READINESS_REASONS``).
- ``run(request_id, profile, state_data_json)``: the terminal receipt, or a
  ``refused`` answer (retcode 1) backed by a refusal record: proof that this
  publication never ran and never will.
- ``status(request_id, jid, profile, state_digest)``: a status answer.

Both ``run`` and ``status`` accept exactly the keys a plain ``local`` /
``local_async`` publication of them carries (``PUBLICATION_KEYS``), with the
values that mean "no option"; anything else (executors, returners, metadata,
caller keywords) is ``forbidden_option``, and a call that is not a master
publication at all (``salt-call``) is refused without touching the store.

Errors come back as ``{"protocol": 1, "error": <code>, "message": <text>}``
with retcode 1; no message ever repeats what the caller sent.

The file depends on the Python standard library and, inside functions only,
on the Salt runtime that loads it, so the validation helpers can be imported
and tested anywhere. ``__virtual__`` keeps it off anything but Linux with a
Salt of the 3006 line; a 3006 release other than the pinned one still loads,
so that ``capabilities`` can report it as not ready.
"""

import contextlib
import errno
import hashlib
import importlib
import inspect
import io
import itertools
import json
import logging
import os
import re
import secrets
import stat
import sys
import time

try:
    import fcntl
except ImportError:  # not Linux: __virtual__ keeps the module unloaded
    fcntl = None

__version__ = "1.1.1"
__virtualname__ = "oduflow_job"

log = logging.getLogger(__name__)

PROTOCOL = 1
PINNED_SALT_VERSION = "3006.27"
SALT_LINE = "3006"
DEFAULT_RECEIPT_DIR = "/var/lib/oduflow/job-receipts"
RECEIPT_DIR_OPTION = "oduflow_receipt_dir"

PROFILE_ROLES = {
    "configure": "roles.client_stack",
    "production": "roles.client_production",
    "volume_resize": "roles.client_storage_resize",
    "credentials": "roles.client_credentials",
}
CUSTOM_PROFILE = "custom"
PROFILES = (*PROFILE_ROLES, CUSTOM_PROFILE)

TERMINAL_STATUSES = ("succeeded", "failed", "unknown")
REFUSED = "refused"
ANSWER_STATUSES = ("not_started", "running", *TERMINAL_STATUSES, REFUSED)
# What a request record on disk may say: a claim, a receipt or a refusal.
RECORD_STATUSES = ("running", *TERMINAL_STATUSES, REFUSED)
# A record that settles the publication for good: a receipt or a refusal.
FINAL_STATUSES = (*TERMINAL_STATUSES, REFUSED)
BINDING_FIELDS = ("minion_id", "request_id", "jid", "profile", "state_digest")
ANSWER_FIELDS = frozenset(("protocol", *BINDING_FIELDS, "status", "passed", "total"))
REFUSED_FIELDS = ANSWER_FIELDS | {"reason"}
JID_INDEX_FIELDS = frozenset(("protocol", *BINDING_FIELDS))

# Why run refuses a valid publication for good (each is also an error code).
REFUSAL_REASONS = ("execution_busy", "not_ready", "unsupported_runtime", "forbidden_option", "parallel_refused")

# Readiness checks, in the closed order capabilities reports failures in
# (docs/wire-contract.md "Capabilities"; gpg_cache was appended by module 1.1.0).
READINESS_REASONS = (
    "salt_version",
    "multiprocessing",
    "cache_jobs",
    "pillar_cache",
    "sudo_user",
    "module_executors",
    "salt_internals",
    "store_unsafe",
    "gpg_cache",
)
# Failures that leave the raw-result shims unsafe: run refuses them as
# unsupported_runtime; every other readiness failure is not_ready.
RUNTIME_REASONS = frozenset(("salt_version", "multiprocessing", "salt_internals"))
CAPABILITIES_FIELDS = frozenset(("protocol", "module_version", "salt_version", "module_sha256", "ready", "reasons"))

# The keys Salt injects into a function called for a plain local/local_async
# publication: salt/master.py ClearFuncs._prep_pub builds the load (fun, arg,
# tgt, jid, ret, tgt_type, user), salt/minion.py load_args_and_kwargs copies
# each key as __pub_<key> (docs/protocol-rules.md "Publication keys").
PUBLICATION_KEYS = frozenset(
    ("__pub_fun", "__pub_arg", "__pub_tgt", "__pub_tgt_type", "__pub_jid", "__pub_ret", "__pub_user")
)
# The one target form the master publishes with: exactly this minion's id.
PUBLICATION_TGT_TYPE = "list"

MAX_SAFE_INTEGER = 2**53 - 1
# Canonical JSON nests at most this deep (the top-level container is depth 1).
MAX_JSON_DEPTH = 100
MAX_HIGH_DATA_BYTES = 64 * 1024
MAX_HIGH_DATA_DEPTH = 32
# A store file holds one small canonical JSON object; anything bigger is not ours.
MAX_STORE_FILE_BYTES = 4096
# A record is replaced at most twice (claim, receipt); a read that keeps losing
# the race with a rename is not reading a store this module writes.
_READ_ATTEMPTS = 5
# run takes the request lock without waiting on a living worker of the same
# request; it only outlasts a status probe or a temp-file sweep, which hold
# the lock (shared) for a few reads, or a refusal's two atomic writes.
_REFUSAL_LOCK_ATTEMPTS = 200
_REFUSAL_LOCK_PAUSE = 0.01
# How long status waits when it finds a JID index without a record under a
# busy request lock, for that record or the lock. A refusal holds the lock
# only across its two atomic writes, an apply's claim reaches its running
# record just as fast and then holds the lock for the whole run. Past the
# bound status answers running; should a refusal record still follow, the
# master quarantines the request (refused after running) and an operator
# looks: a bound too short costs a human a look, never a second apply, and
# never a false unknown or not_started.
STATUS_REFUSAL_WAIT_SECONDS = 0.25
_STATUS_REFUSAL_PAUSE = 0.005

# Every state call is synchronous, in this process, never queued, never
# beside another state run, never in test mode, never publishing per-state
# events (DESIGN section 4).
STATE_CALL_OPTIONS = {
    "test": False,
    "queue": False,
    "concurrent": False,
    "state_events": False,
}

_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_UUID_RE = re.compile(_UUID)
_MINION_ID_RE = re.compile("client-" + _UUID)
_JID_RE = re.compile("[0-9]{20}")
_SHA256_RE = re.compile("[0-9a-f]{64}")
# semver.org 2.0.0's recommended pattern, ASCII classes only (packages/protocol SEMVER_PATTERN).
_SEMVER_RE = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
# A temp file names its target and the request whose lock its writer holds.
_TEMP_RE = re.compile(r"\.[^/]+\.(" + _UUID + r")\.[0-9a-f]{16}\.tmp")
# Module 1.0.0 temp files: written only under the execution lock.
_LEGACY_TEMP_RE = re.compile(r"\.[^/]+\.[0-9a-f]{16}\.tmp")

_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
_LOCK_FLAGS = os.O_RDWR | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC


class ProtocolError(Exception):
    """A refusal with a protocol error code (packages/protocol/src/errors.ts)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def _file_sha256(path):
    with open(path, "rb") as module_file:
        return hashlib.sha256(module_file.read()).hexdigest()


# The digest of the bytes this process loaded, taken when it loaded them.
try:
    _MODULE_SHA256 = _file_sha256(__file__)
except (NameError, OSError):  # pragma: no cover - a loader without a file
    _MODULE_SHA256 = None


def __virtual__():
    """Load on Linux under a Salt of the 3006 line; otherwise say why not."""
    if not sys.platform.startswith("linux") or fcntl is None:
        return (False, "oduflow_job runs only on Linux (it needs flock and no-follow directory opens)")
    try:
        import salt.version
    except ImportError:
        return (False, "oduflow_job needs the Salt runtime that loads it")
    if salt.version.__version__.split(".")[0] != SALT_LINE:
        return (False, f"oduflow_job supports the Salt {SALT_LINE} line (verified on {PINNED_SALT_VERSION})")
    return __virtualname__


# ---------------------------------------------------------------------------
# Identities


def _validate_request_id(value):
    """Return ``value`` if it is a canonical RFC 9562 UUID string."""
    if not _matches(_UUID_RE, value):
        raise ProtocolError(
            "invalid_request_id",
            "request id must be a lowercase RFC 9562 UUID (version 1-8)",
        )
    return value


def _validate_minion_id(value):
    """Return ``value`` if it is ``client-`` followed by a canonical UUID."""
    if not _matches(_MINION_ID_RE, value):
        raise ProtocolError(
            "invalid_minion_id",
            'minion id must be "client-" followed by a lowercase RFC 9562 UUID',
        )
    return value


def _validate_jid(value):
    """Return ``value`` if it is a string of exactly 20 ASCII digits."""
    if not _matches(_JID_RE, value):
        raise ProtocolError("invalid_jid", "JID must be a string of exactly 20 ASCII digits")
    return value


def _validate_profile(value):
    if type(value) is not str or value not in PROFILES:
        raise ProtocolError("invalid_profile", "profile must be one of: " + ", ".join(PROFILES))
    return value


def _validate_state_digest(profile, value):
    if not _digest_fits(profile, value):
        raise ProtocolError(
            "invalid_state_digest",
            'state digest must be "" for a fixed role and 64 lowercase hex for custom',
        )
    return value


def _digest_fits(profile, digest):
    if profile == CUSTOM_PROFILE:
        return _matches(_SHA256_RE, digest)
    return type(digest) is str and digest == ""


# ---------------------------------------------------------------------------
# Canonical JSON (RFC 8785 on the domain both languages serialize alike)


def _canonical_json(value):
    """Return the canonical serialization of ``value`` or raise ``unsupported_json_value``.

    The domain walk (``_check_domain``) checks every rule but lone surrogates
    and leaves the bytes to one ``json.dumps`` with sorted keys; a text that
    does not encode as UTF-8 held a lone surrogate. ``sort_keys`` orders by
    code point, which is UTF-16 order unless a key holds a character above
    U+FFFF: such a value takes the exact per-leaf serializer.
    """
    try:
        _check_domain(value, 0)
        text = _CANONICAL_ENCODER.encode(value)
        if text.isascii():
            return text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _unsupported_json_value() from None
        if not _has_astral(text):
            return text
        parts = []
        _emit_canonical(value, parts, 0)
        return "".join(parts)
    except RecursionError:
        raise ProtocolError("unsupported_json_value", "value is nested too deeply to serialize") from None


# Key order is decided by the walk's caller, never by the encoder's own sort alone (see _canonical_json).
_CANONICAL_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False)
_LEAF_KINDS = frozenset((str, int, bool, type(None)))
_CHILD_KINDS = frozenset((str, int, bool, type(None), list, dict))
_STR_KIND = frozenset((str,))


def _check_domain(container, depth):
    """Raise ``unsupported_json_value`` unless ``container`` is in the domain, lone surrogates aside.

    The rules of ``_emit_canonical``, checked per container with C-level scans
    (``set(map(type, ...))``) instead of a Python step per leaf.
    """
    kind = type(container)
    if kind is dict:
        if not _STR_KIND.issuperset(map(type, container)):
            raise _unsupported_json_value()
        children = container.values()
    elif kind is list:
        children = container
    elif kind in _LEAF_KINDS:
        if kind is int and not -MAX_SAFE_INTEGER <= container <= MAX_SAFE_INTEGER:
            raise _unsupported_json_value()
        return
    else:
        raise _unsupported_json_value()
    depth += 1
    if depth > MAX_JSON_DEPTH:
        raise ProtocolError("unsupported_json_value", f"value nests deeper than {MAX_JSON_DEPTH} levels")
    kinds = set(map(type, children))
    if not _CHILD_KINDS.issuperset(kinds):
        raise _unsupported_json_value()
    if int in kinds:
        numbers = [child for child in children if type(child) is int]
        if min(numbers) < -MAX_SAFE_INTEGER or max(numbers) > MAX_SAFE_INTEGER:
            raise _unsupported_json_value()
    if list in kinds or dict in kinds:
        for child in children:
            if type(child) is list or type(child) is dict:
                _check_domain(child, depth)


def _emit_canonical(value, parts, depth):
    kind = type(value)
    if kind in (list, dict):
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise ProtocolError("unsupported_json_value", f"value nests deeper than {MAX_JSON_DEPTH} levels")
    if value is None:
        parts.append("null")
    elif kind is bool:
        parts.append("true" if value else "false")
    elif kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        parts.append(str(value))
    elif kind is str:
        parts.append(_canonical_string(value))
    elif kind is list:
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _emit_canonical(item, parts, depth)
        parts.append("]")
    elif kind is dict:
        keys = {key: _canonical_string(key) for key in value}
        parts.append("{")
        for index, key in enumerate(sorted(keys, key=_utf16_sort_key)):
            if index:
                parts.append(",")
            parts.append(keys[key])
            parts.append(":")
            _emit_canonical(value[key], parts, depth)
        parts.append("}")
    else:
        raise _unsupported_json_value()


def _canonical_string(text):
    if type(text) is not str:
        raise _unsupported_json_value()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _unsupported_json_value() from None
    return json.dumps(text, ensure_ascii=False)


def _utf16_sort_key(key):
    return key.encode("utf-16-be")


def _unsupported_json_value():
    return ProtocolError(
        "unsupported_json_value",
        "value is outside the canonical JSON domain "
        "(objects, arrays, well-formed strings, booleans, null, safe integers)",
    )


def _parse_canonical_json(text):
    """Return the value of ``text`` if ``text`` is exactly its canonical serialization."""
    if type(text) is not str:
        raise ProtocolError("non_canonical_json", "canonical JSON text must be a string")
    if _nesting_bound(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH and _text_nesting_depth(text) > MAX_JSON_DEPTH:
        # Scanned on the text, so no parser's recursion limit decides anything.
        raise ProtocolError("non_canonical_json", f"text nests deeper than {MAX_JSON_DEPTH} levels")
    return _parse_shallow_canonical_json(text)


class _OutsideDomain(ValueError):
    """A number the canonical domain has no text for, found while parsing."""


def _refuse_number(_text):
    raise _OutsideDomain


def _safe_int(digits):
    number = int(digits)
    if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        return number
    raise _OutsideDomain


# No canonical text holds a fraction, an exponent, NaN, Infinity or an integer beyond 2^53-1:
# the parser refuses each as it meets it.
_DECODER = json.JSONDecoder(parse_float=_refuse_number, parse_constant=_refuse_number, parse_int=_safe_int)


def _parse_shallow_canonical_json(text):
    """``_parse_canonical_json`` after its depth check.

    ``text`` nests at most ``MAX_JSON_DEPTH`` levels, or ``_nesting_bound``
    says so: then the parser cannot nest deeper, and a text it accepts nests
    exactly that deep.

    ``json`` parses; the value is canonical exactly when the canonical
    serializer gives ``text`` back. That is decided natively when it can be:
    a text that encodes as UTF-8 (no lone surrogate) and has no character
    above U+FFFF (so code-point key order is UTF-16 order) is canonical
    exactly when ``json.dumps`` with sorted keys returns it, since the parsed
    value then lies in the domain (numbers were checked by the decoder) and
    the canonical serializer writes the same bytes. Any other text takes
    the exact serializer.
    """
    try:
        value = _DECODER.decode(text)
    except _OutsideDomain:
        raise ProtocolError("non_canonical_json", "text holds a value outside the canonical JSON domain") from None
    except (ValueError, RecursionError):
        raise ProtocolError("non_canonical_json", "text is not valid JSON") from None
    if text.isascii() or _is_plain_unicode(text):
        canonical = _CANONICAL_ENCODER.encode(value)
    else:
        try:
            canonical = _canonical_json(value)
        except ProtocolError:
            raise ProtocolError("non_canonical_json", "text holds a value outside the canonical JSON domain") from None
    if canonical != text:
        raise ProtocolError(
            "non_canonical_json",
            "text is not in canonical form (key order, whitespace, escapes or number spelling)",
        )
    return value


def _is_plain_unicode(text):
    """True for a text that encodes as UTF-8 and holds no character above U+FFFF."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not _has_astral(text)


def _has_astral(text):
    """True when ``text`` (free of surrogates) holds a character above U+FFFF: two UTF-16 units, not one."""
    return len(text.encode("utf-16-le")) != 2 * len(text)


# ---------------------------------------------------------------------------
# Custom high data


def _state_digest(state_data_json):
    """Return the SHA-256 hex digest binding custom high data, after every check."""
    return _parse_high_data(state_data_json)[1]


def _parse_high_data(text):
    """Validate custom high data in the order of docs/protocol-rules.md; return (value, digest)."""
    if type(text) is not str:
        raise ProtocolError("invalid_high_data", "state data must be a JSON text")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_HIGH_DATA_BYTES:
        raise ProtocolError(
            "high_data_too_large",
            f"high data exceeds {MAX_HIGH_DATA_BYTES} bytes of canonical JSON",
        )
    exact_depth = False
    if _nesting_bound(text, MAX_HIGH_DATA_DEPTH) > MAX_HIGH_DATA_DEPTH:
        if _text_nesting_depth(text) > MAX_HIGH_DATA_DEPTH:
            raise _high_data_too_deep()
        exact_depth = True
    # MAX_HIGH_DATA_DEPTH < MAX_JSON_DEPTH: _parse_canonical_json's own depth check would find nothing more.
    try:
        value = _parse_shallow_canonical_json(text)
    except ProtocolError:
        # A text the parser refused may nest deeper than its bound told: the depth comes first.
        if not exact_depth and _text_nesting_depth(text) > MAX_HIGH_DATA_DEPTH:
            raise _high_data_too_deep() from None
        raise
    # In canonical text a key is written raw between quotes ("_" is never escaped), so a text
    # without '"__' or '"parallel"' holds no forbidden key: only one with either is walked.
    if '"__' in text or '"parallel"' in text:
        _reject_forbidden_keys(value)
    _check_high_data_shape(value)
    return value, hashlib.sha256(raw).hexdigest()


def _high_data_too_deep():
    return ProtocolError("high_data_too_deep", f"high data nests deeper than {MAX_HIGH_DATA_DEPTH} levels")


# A string literal (to its closing quote, or to the end of an unterminated one) or a run of
# anything but brackets and quotes: what _text_nesting_depth deletes before it counts.
_NOT_A_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[^"\[\]{}]+', re.DOTALL)
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _text_nesting_depth(text):
    """Maximum bracket nesting of a JSON text, ignoring brackets inside string literals.

    A string starts at ``"`` and ends at the next ``"`` not escaped by ``\\``
    (a ``\\`` escapes whatever follows it). The regular expression deletes
    every string and everything else that is not a bracket; the depth is then
    the highest running sum of +1 per opening and -1 per closing bracket, all
    in C rather than a Python step per character.
    """
    brackets = _NOT_A_BRACKET.sub("", text)
    return max(0, max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0))


_BRACKETS_AS_PARENTHESES = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def _nesting_bound(text, limit):
    """``_text_nesting_depth(text)`` for a JSON text, found faster; for any text, a bound on what a parser reaches.

    Inside a string ``\\`` and ``\"`` are the only escapes that matter, so
    deleting them leaves every string between two plain quotes, and the
    pieces between the strings are the text's structure. Its brackets become
    parentheses, and deleting every ``()`` once per pass peels one level
    each time (all in C). For a JSON text, which has no backslash outside its
    strings, the result is exact. For any other, it is exact up to the first
    backslash outside a string, where every JSON parser stops, and past that
    point an upper bound of the sequence left (passes plus unmatched
    openings): so a parser that gets a text bounded by ``limit`` never nests
    deeper than ``limit``. Returns ``limit + 1`` as soon as the bound exceeds it.
    """
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    structure = "".join(text.split('"')[::2])
    brackets = structure.encode("utf-8", "surrogatepass").translate(_BRACKETS_AS_PARENTHESES, _NOT_BRACKETS)
    height = 0
    while b"()" in brackets:
        if height == limit:
            return limit + 1
        brackets = brackets.replace(b"()", b"")
        height += 1
    return height + brackets.count(b"(")


def _reject_forbidden_keys(value):
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is list:
            pending.extend(item)
        elif type(item) is dict:
            for key, child in item.items():
                if key.startswith("__") or key == "parallel":
                    raise ProtocolError(
                        "forbidden_key",
                        'high data uses a reserved key (one starting with "__", or "parallel")',
                    )
                pending.append(child)


def _check_high_data_shape(value):
    if type(value) is not dict or not value:
        raise ProtocolError("invalid_high_data", "high data must be a non-empty object of state ids")
    for body in value.values():
        if type(body) is not dict or not body:
            raise ProtocolError("invalid_high_data", "each state must be a non-empty object")
        if not _LIST_KIND.issuperset(map(type, body.values())):
            raise ProtocolError(
                "invalid_high_data",
                "each state entry must map to a list of function arguments",
            )
        # One declaration (the usual state) cannot repeat a module.
        if len(body) > 1 and len({_state_module(key) for key in body}) != len(body):
            raise _duplicate_state_module()


_LIST_KIND = frozenset((list,))


def _state_module(key):
    """The state module a state-body key names: the text before its first ".".

    Salt's SLS compiler splits ``"<module>.<function>"`` keys on "." and
    refuses a second declaration of the same module in one state.
    """
    return key.partition(".")[0]


def _duplicate_state_module():
    return ProtocolError("invalid_high_data", "a state declares the same state module twice")


def _check_state_data(profile, state_data_json):
    """Return (high data or None, state digest) for a validated profile."""
    if profile == CUSTOM_PROFILE:
        value, digest = _parse_high_data(state_data_json)
        return _state_high_data(value), digest
    if state_data_json != "":
        raise ProtocolError("invalid_high_data", "a fixed-role profile takes no state data")
    return None, ""


def _state_high_data(value):
    """Rewrite ``"<module>.<function>": [args]`` as ``"<module>": [args, "<function>"]``.

    The SLS compiler does this for rendered files, but ``state.high`` does
    not: Salt 3006.27's ``State.compile_high_data`` silently skips a dotted
    declaration (it collects only string arguments as functions), which would
    let a receipt count fewer states than the caller sent.
    """
    high = {}
    for state_id, body in value.items():
        declarations = {}
        for key, args in body.items():
            module, dot, function = key.partition(".")
            if module in declarations:
                # _check_high_data_shape refused this before any digest existed.
                raise _duplicate_state_module()
            declarations[module] = [*args, function] if dot else args
        high[state_id] = declarations
    return high


# ---------------------------------------------------------------------------
# Reduction, receipts, status answers and capabilities


def _reduce_state_result(ret):
    """Reduce a state return to {status, passed, total}; only proof gives a verdict."""
    unknown = {"status": "unknown", "passed": 0, "total": 0}
    if not isinstance(ret, dict) or not ret:
        return unknown
    passed = 0
    for state in ret.values():
        if not isinstance(state, dict) or "result" not in state:
            return unknown
        result = state["result"]
        if type(result) is not bool:
            return unknown
        passed += result
    total = len(ret)
    return {
        "status": "succeeded" if passed == total else "failed",
        "passed": passed,
        "total": total,
    }


def _validate_receipt(receipt, binding=None):
    """Return ``receipt`` if it is a valid terminal receipt bound as ``binding`` says."""
    if not _answer_is_valid(receipt, TERMINAL_STATUSES):
        raise ProtocolError("invalid_receipt", "receipt does not match the protocol 1 schema")
    _check_binding(receipt, binding or {}, "receipt")
    return receipt


def _validate_status_answer(answer, binding):
    """Return ``answer`` if it is a valid status answer bound as ``binding`` says."""
    if not _answer_is_valid(answer, ANSWER_STATUSES):
        raise ProtocolError("invalid_status_answer", "status answer does not match the protocol 1 schema")
    _check_binding(answer, binding, "status answer")
    return answer


def _answer_is_valid(value, statuses):
    """The nine receipt keys; a ``refused`` answer has ``reason`` as a tenth and only then."""
    if type(value) is not dict:
        return False
    refused = value.get("status") == REFUSED
    return (
        value.keys() == (REFUSED_FIELDS if refused else ANSWER_FIELDS)
        and _binding_fields_are_valid(value)
        and type(value["status"]) is str
        and value["status"] in statuses
        and _is_count(value["passed"])
        and _is_count(value["total"])
        and _counts_fit(value["status"], value["passed"], value["total"])
        and (not refused or (type(value["reason"]) is str and value["reason"] in REFUSAL_REASONS))
    )


def _binding_fields_are_valid(value):
    return (
        type(value["protocol"]) is int
        and value["protocol"] == PROTOCOL
        and _matches(_MINION_ID_RE, value["minion_id"])
        and _matches(_UUID_RE, value["request_id"])
        and _matches(_JID_RE, value["jid"])
        and value["profile"] in PROFILES
        and _digest_fits(value["profile"], value["state_digest"])
    )


def _matches(pattern, value):
    return type(value) is str and pattern.fullmatch(value) is not None


def _is_count(value):
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def _counts_fit(status, passed, total):
    if status == "succeeded":
        return total > 0 and passed == total
    if status == "failed":
        return total > 0 and passed < total
    return passed == 0 and total == 0


def _check_binding(value, binding, subject):
    unknown = set(binding) - set(BINDING_FIELDS)
    if unknown:
        # A misspelt binding key would otherwise silently bind nothing.
        raise TypeError("a binding may only name " + ", ".join(BINDING_FIELDS))
    for field in BINDING_FIELDS:
        if field in binding and binding[field] != value[field]:
            raise ProtocolError(
                "binding_conflict",
                f"{subject} is bound to a different {field} than this request",
            )


def _validate_capabilities(value):
    """Return ``value`` if it is a capabilities answer of module 1.1.0's shape, else ``invalid_capabilities``."""
    if not (
        type(value) is dict
        and value.keys() == CAPABILITIES_FIELDS
        and type(value["protocol"]) is int
        and value["protocol"] == PROTOCOL
        and _matches(_SEMVER_RE, value["module_version"])
        and type(value["salt_version"]) is str
        and _matches(_SHA256_RE, value["module_sha256"])
        and type(value["ready"]) is bool
        and _reasons_are_valid(value["reasons"])
        and value["ready"] == (not value["reasons"])
    ):
        raise ProtocolError(
            "invalid_capabilities",
            "capabilities answer does not match the protocol 1 schema (module 1.1.0)",
        )
    return value


def _reasons_are_valid(reasons):
    """A list of readiness reasons, each known, none twice, in the closed order."""
    if type(reasons) is not list or not all(type(r) is str and r in READINESS_REASONS for r in reasons):
        return False
    positions = [READINESS_REASONS.index(r) for r in reasons]
    return positions == sorted(set(positions))


# ---------------------------------------------------------------------------
# The private store: no-follow traversal, owner/mode/link checks, atomic writes


def _unsafe(message):
    return ProtocolError("unsafe_store", message)


def _malformed(message):
    return ProtocolError("malformed_store", message)


class _Store:
    """The receipt store under one root, opened component by component without following links.

    Layout (docs/wire-contract.md): ``jids/<jid>.json``, ``requests/<request_id>.json``,
    ``locks/execution.lock``, ``locks/<request_id>.lock``. The root and its
    subdirectories are owned by the effective uid with mode 0700, every file
    has mode 0600 and exactly one link.
    """

    SUBDIRS = ("jids", "requests", "locks")

    def __init__(self, dir_fds):
        self._fds = dir_fds

    @classmethod
    def open(cls, root, create):
        """Open the store, creating missing directories when ``create``; None if absent."""
        names = _path_names(root)
        fds = {}
        parent = os.open("/", _DIR_FLAGS)
        try:
            for position, name in enumerate(names):
                private = position == len(names) - 1
                child = _open_dir(parent, name, create, private)
                os.close(parent)
                parent = child
                if parent is None:
                    return None
            for name in cls.SUBDIRS:
                fds[name] = _open_dir(parent, name, create, True)
        except BaseException:
            for fd in fds.values():
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            if parent is not None:
                os.close(parent)
        return cls(fds)

    def close(self):
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def read(self, subdir, name):
        """The parsed canonical JSON object stored as ``subdir/name``, or None if absent."""
        dir_fd = self._fds[subdir]
        if dir_fd is None:
            return None
        data = None
        for _attempt in range(_READ_ATTEMPTS):
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise _refused_open(exc) from None
            try:
                info = os.fstat(fd)
                if info.st_nlink == 0:
                    # An atomic write renamed a new file over the one just
                    # opened (a claim becoming its receipt): read the new one.
                    continue
                _check_file(fd, info)
                data = os.read(fd, MAX_STORE_FILE_BYTES + 1)
            finally:
                os.close(fd)
            break
        if data is None:
            raise _unsafe("a receipt store file kept being replaced while it was read")
        if len(data) > MAX_STORE_FILE_BYTES:
            raise _malformed("a receipt store file is larger than any protocol record")
        try:
            return _parse_canonical_json(data.decode("utf-8"))
        except (UnicodeDecodeError, ProtocolError):
            raise _malformed("a receipt store file is not canonical JSON") from None

    def write(self, subdir, name, value, owner):
        """Atomically replace ``subdir/name``: exclusive temp, fsync, rename, fsync(dir).

        ``owner`` is the request whose lock the caller holds; the temp file
        carries it, so a sweep can tell a live writer's temp from a dead one's.
        """
        dir_fd = self._fds[subdir]
        data = _canonical_json(value).encode("utf-8")
        temp = f".{name}.{owner}.{secrets.token_hex(8)}.tmp"
        fd = os.open(temp, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(temp, dir_fd=dir_fd)
            raise
        os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)

    def remove_stale_temps(self, own_request_id):
        """Delete temp files whose writer died; call under the execution lock and ``own_request_id``'s lock.

        Every writer holds its request's lock while its temp file exists
        (refusals are written without the execution lock), so a temp is stale
        exactly when no process holds that lock; the probe holds it shared
        while the temp is removed. The caller's own request lock is held by
        the caller itself. Temps of module 1.0.0 name no request; its writers
        always held the execution lock, which the caller holds now.
        """
        for subdir in ("jids", "requests"):
            dir_fd = self._fds[subdir]
            removed = False
            for name in os.listdir(dir_fd):
                if not name.startswith("."):
                    continue  # a record or an index: only temps start with a dot (cheap next to the regexes)
                owned = _TEMP_RE.fullmatch(name)
                if owned is not None and owned.group(1) != own_request_id:
                    with self.probe_lock(owned.group(1) + ".lock") as busy:
                        if not busy:
                            os.unlink(name, dir_fd=dir_fd)
                            removed = True
                elif owned is not None or _LEGACY_TEMP_RE.fullmatch(name):
                    os.unlink(name, dir_fd=dir_fd)
                    removed = True
            if removed:
                os.fsync(dir_fd)

    def lock(self, name, blocking):
        """Create (if needed) and flock ``locks/name`` exclusively; return its fd.

        Raises BlockingIOError when ``blocking`` is false and another process holds it.
        """
        fd = _open_lock_file(self._fds["locks"], name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lock_without_waiting_on_a_worker(self, name):
        """Take ``locks/name`` exclusively, retrying only past short shared holders.

        A worker of the same request holds the lock for its whole apply; a
        status probe or a temp sweep holds it shared for a few reads. Raises
        BlockingIOError when the lock stays taken (a worker is alive).
        """
        for attempt in range(_REFUSAL_LOCK_ATTEMPTS):
            if attempt:
                time.sleep(_REFUSAL_LOCK_PAUSE)
            try:
                return self.lock(name, blocking=False)
            except BlockingIOError:
                continue
        raise BlockingIOError(errno.EWOULDBLOCK, "the request lock is held")

    @contextlib.contextmanager
    def probe_lock(self, name):
        """Yield True while a living process holds ``locks/name`` exclusively.

        Otherwise yield False while holding a *shared* lock on it, so no
        worker can take it until the block ends (concurrent probes share it
        and never see each other as busy). The probe never creates the file:
        a missing lock file has no holder.
        """
        dir_fd = self._fds["locks"]
        if dir_fd is None:
            yield False
            return
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            yield False
            return
        except OSError as exc:
            raise _refused_open(exc) from None
        try:
            _check_file(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                busy = True
            else:
                busy = False
            yield busy
        finally:
            os.close(fd)


def _path_names(root):
    """The components of an absolute store root other than ``/`` itself."""
    if type(root) is str and os.path.isabs(root):
        names = [name for name in os.path.normpath(root).split("/") if name]
        if names:
            return names
    raise _unsafe("the receipt directory option must be an absolute path below /")


def _open_dir(parent, name, create, private):
    """Open directory ``name`` below ``parent`` without following links; check it.

    ``private`` levels (the store root and its subdirectories) must be owned by
    the effective uid with mode 0700. Ancestors must be owned by root or the
    effective uid and not writable by others unless sticky. Returns None for a
    missing directory when not ``create``.
    """
    created = False
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=parent)
            created = True
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise _refused_open(exc) from None
    except OSError as exc:
        raise _refused_open(exc) from None
    try:
        info = os.fstat(fd)
        if created:
            os.fchmod(fd, 0o700)
            os.fsync(parent)
            info = os.fstat(fd)
        if private:
            if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) != 0o700:
                raise _unsafe("a receipt store directory has the wrong owner or mode")
        elif info.st_uid not in (0, os.geteuid()) or (info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX):
            raise _unsafe("a directory above the receipt store is writable by another user")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refused_open(exc):
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return _unsafe("the receipt store path holds a symbolic link or a non-directory")
    return _unsafe("the receipt store could not be opened")


def _check_file(fd, info=None):
    if info is None:
        info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _unsafe("a receipt store entry is not a regular file")
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) != 0o600:
        raise _unsafe("a receipt store file has the wrong owner or mode")
    if info.st_nlink != 1:
        raise _unsafe("a receipt store file has more than one link")


def _open_lock_file(dir_fd, name):
    """Open ``locks/name``, creating it when missing; the existing file is tried first (one open per lock).

    A new lock file is not fsynced into its directory: a flock does not
    outlive a crash, and a lock file lost with one has no holder, which is
    what ``probe_lock`` answers for a missing file. Nothing durable depends
    on it, so the apply pays for no directory fsync here.
    """
    try:
        fd = _open_existing_lock_file(dir_fd, name)
    except FileNotFoundError:
        try:
            fd = os.open(name, _LOCK_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        except FileExistsError:  # created by another process since the first open
            fd = _open_existing_lock_file(dir_fd, name)
        else:
            os.fchmod(fd, 0o600)
    try:
        _check_file(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_existing_lock_file(dir_fd, name):
    """Open an existing ``locks/name`` (no-follow); FileNotFoundError when there is none, else unsafe on failure."""
    try:
        return os.open(name, _LOCK_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refused_open(exc) from None


def _read_evidence(store, binding):
    """The JID index and request record for ``binding``, each checked; (index, record).

    The index is always written before the record (claim and refusal alike),
    so a record whose index is missing or bound differently is inconsistent
    evidence: an error, never an answer.
    """
    index = store.read("jids", binding["jid"] + ".json")
    if index is not None and (not _jid_index_is_valid(index) or index["jid"] != binding["jid"]):
        raise _malformed("a JID index in the receipt store is malformed")
    record = store.read("requests", binding["request_id"] + ".json")
    if record is None:
        if index is not None:
            _check_binding(index, binding, "the JID index")
        return index, None
    if not _answer_is_valid(record, RECORD_STATUSES) or record["request_id"] != binding["request_id"]:
        raise _malformed("a request record in the receipt store is malformed")
    _check_binding(record, binding, "the request record")
    if index is None or any(index[field] != record[field] for field in BINDING_FIELDS):
        raise ProtocolError(
            "inconsistent_evidence",
            "a request record in the receipt store has no JID index bound the same way",
        )
    return index, record


def _jid_index_is_valid(value):
    return type(value) is dict and value.keys() == JID_INDEX_FIELDS and _binding_fields_are_valid(value)


# ---------------------------------------------------------------------------
# Readiness


def _readiness_reasons(include_store):
    """The readiness checks that fail on this minion, in READINESS_REASONS order."""
    import salt.version

    opts = __opts__
    failed = {
        "salt_version": salt.version.__version__ != PINNED_SALT_VERSION,
        # Salt's own defaults for an absent option (salt/config/__init__.py DEFAULT_MINION_OPTS).
        "multiprocessing": opts.get("multiprocessing", True) is not True,
        "cache_jobs": opts.get("cache_jobs", False) is not False,
        "pillar_cache": any(opts.get(name, False) is not False for name in ("minion_pillar_cache", "pillar_cache")),
        "sudo_user": bool(opts.get("sudo_user", "")),
        "module_executors": opts.get("module_executors", ["direct_call"]) != ["direct_call"],
        "salt_internals": _shim_targets() is None,
        "store_unsafe": include_store and not _store_is_safe(),
        "gpg_cache": opts.get("gpg_cache", False) is not False,
    }
    return [reason for reason in READINESS_REASONS if failed[reason]]


def _runtime_refusal():
    """Why ``run`` must refuse on this runtime (store safety aside), or None."""
    reasons = _readiness_reasons(include_store=False)
    if RUNTIME_REASONS.intersection(reasons):
        return "unsupported_runtime"
    return "not_ready" if reasons else None


def _store_is_safe():
    """The store root opens safely (an absent store is created safely at the first run)."""
    try:
        store = _Store.open(_store_root(), create=False)
    except ProtocolError:
        return False
    if store is not None:
        store.close()
    return True


# ---------------------------------------------------------------------------
# Raw-result suppression inside the isolated job worker


class _StopApply(BaseException):
    """Stops Salt's state run before its first chunk; never leaves this module.

    A BaseException, so no ``except Exception`` on Salt's way up swallows it.
    """


class _ManagedApply:
    """One managed apply: its store and binding, and the gate its compiled chunks pass."""

    def __init__(self, store, binding, cachedir):
        self.store = store
        self.binding = binding
        self.cache_root = os.path.abspath(cachedir)
        self.claimed = False
        self.refusal = None
        self.failure = None
        self._gated = False

    def gate(self, chunks):
        """Claim, or refuse a parallel state, once the role is compiled and before any state runs.

        Salt calls ``State.call_chunks`` with every compiled low chunk of the
        run (extends, requisites and excludes applied) before it executes the
        first one, so the role is rendered once and inspected exactly as it
        would run. A refusal is written before any claim, never beside one.
        """
        if self._gated:
            return  # a state run nested inside a state: the apply is already claimed
        self._gated = True
        try:
            if any(isinstance(low, dict) and low.get("parallel") for low in chunks):
                self.refusal = _commit_refusal(self.store, self.binding, "parallel_refused")
            else:
                self.claim()
                return
        except BaseException as exc:  # noqa: BLE001 - re-raised by _apply once Salt's run has unwound
            self.failure = exc
        raise _StopApply()

    def claim(self):
        """The JID index then the ``running`` record: two atomic writes, crash points between."""
        binding = self.binding
        _crash_point("M1")
        self.store.write("jids", binding["jid"] + ".json", {"protocol": PROTOCOL, **binding}, binding["request_id"])
        _crash_point("M2")
        running = {"protocol": PROTOCOL, **binding, "status": "running", "passed": 0, "total": 0}
        self.store.write("requests", binding["request_id"] + ".json", running, binding["request_id"])
        _crash_point("M3")
        self.claimed = True


def _guarded_fopen(original, apply):
    """``sls.p`` / ``*.cache.p`` writes go to throwaway streams; reads of them are refused."""

    def guarded_fopen(*args, **kwargs):
        path = args[0] if args else None
        if isinstance(path, str) and _is_state_cache_path(path, apply.cache_root):
            mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
            if "w" in mode:
                return io.BytesIO() if "b" in mode else io.StringIO()
            raise PermissionError(errno.EACCES, "state cache reads are refused during a managed apply")
        return original(*args, **kwargs)

    return guarded_fopen


def _silent_event(original, apply):
    """Per-state ``fire_event`` publishes raw returns whatever ``state_events`` says."""

    def silent_event(self, chunk_ret, length, fire_event=False):
        return None

    return silent_event


def _refused_call_parallel(original, apply):
    """Second line behind the gate: parallel results are written below ``<cachedir>/<jid>/``."""

    def refused_call_parallel(self, cdata, low, inject_globals):
        raise RuntimeError("parallel states are refused during a managed apply")

    return refused_call_parallel


def _gated_call_chunks(original, apply):
    """The compiled chunks pass ``apply.gate`` before the first of them runs."""

    def gated_call_chunks(self, chunks):
        apply.gate(chunks)
        return original(self, chunks)

    return gated_call_chunks


# Every Salt internal a managed apply patches, with the signature it was
# verified against on 3006.27 (``str(inspect.signature(...))``): a differing
# one makes capabilities report salt_internals and run refuse with
# unsupported_runtime before anything is patched.
# (module, class or None, attribute, verified signature, replacement factory)
_SALT_SHIMS = (
    ("salt.utils.files", None, "fopen", "(*args, **kwargs)", _guarded_fopen),
    ("salt.state", "State", "event", "(self, chunk_ret, length, fire_event=False)", _silent_event),
    ("salt.state", "State", "call_parallel", "(self, cdata, low, inject_globals)", _refused_call_parallel),
    ("salt.state", "State", "call_chunks", "(self, chunks)", _gated_call_chunks),
)


def _shim_targets():
    """(holder, attribute, original, factory) for every shim, or None when any differs from what was verified."""
    targets = []
    for module_name, class_name, name, signature, factory in _SALT_SHIMS:
        try:
            holder = importlib.import_module(module_name)
            if class_name is not None:
                holder = getattr(holder, class_name)
            original = getattr(holder, name)
            found = str(inspect.signature(original))
        except (ImportError, AttributeError, TypeError, ValueError):
            return None
        if found != signature:
            return None
        targets.append((holder, name, original, factory))
    return targets


@contextlib.contextmanager
def _shims_installed(apply):
    """Keep raw state returns inside this worker while the state runs.

    ``state.sls`` writes the full return to ``<cachedir>/sls.p`` and the
    compiled high data to ``<cachedir>/<name>.cache.p`` whatever the cache
    options; those writes go to disposable in-memory streams and reads of those
    paths are refused. ``State.event`` is silenced, ``State.call_parallel`` is
    refused and ``State.call_chunks`` passes the claim gate first. Every log
    handler blanks records from any logger but this module's own
    (``_suppressed_log_content``): Salt logs failed states' comments, changes
    and stdout/stderr at ERROR. The patches are process-wide, which is why
    ``run`` insists on ``multiprocessing: True``: the worker is then a process
    of its own. Everything is restored on exit, exactly as it was.
    """
    targets = _shim_targets()
    if targets is None:
        raise ProtocolError("unsupported_runtime", _REFUSAL_MESSAGES["unsupported_runtime"])
    installed = []
    try:
        for holder, name, original, factory in targets:
            own = name in vars(holder)
            setattr(holder, name, factory(original, apply))
            installed.append((holder, name, original, own))
        with _suppressed_log_content():
            yield
    finally:
        for holder, name, original, own in reversed(installed):
            if own:
                setattr(holder, name, original)
            else:
                delattr(holder, name)


SUPPRESSED_LOG_TEXT = "{name}: {level} record suppressed during a managed apply (oduflow_job)"


class _LogContentFilter(logging.Filter):
    """Blanks every record not from this module's own logger; lets it through.

    Salt logs failed states' comments, changes and stdout/stderr at ERROR
    (``salt.state.format_log``, ``cmdmod``). Operators still see that
    something was logged, by which logger and at which level, never what.
    """

    def __init__(self, own_logger_name):
        super().__init__()
        self._own = own_logger_name

    def filter(self, record):
        if record.name != self._own:
            record.msg = SUPPRESSED_LOG_TEXT.format(name=record.name, level=record.levelname)
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
            if hasattr(record, "message"):
                record.message = record.msg
            # Salt's exc_info_on_loglevel carries a traceback of its own.
            for name in (
                "exc_info_on_loglevel",
                "exc_info_on_loglevel_instance",
                "exc_info_on_loglevel_formatted",
            ):
                if hasattr(record, name):
                    setattr(record, name, None)
        return True


def _log_handlers():
    """Every handler a record logged in this process can reach, each once.

    Salt 3006.27 attaches its console, log file, syslog and extended handlers
    to the root logger in every process (there is no logging queue to a
    parent); handlers on other loggers and ``logging.lastResort`` count too.
    """
    handlers = {}
    loggers = [logging.getLogger()]
    loggers += [
        logger for logger in list(logging.Logger.manager.loggerDict.values()) if isinstance(logger, logging.Logger)
    ]
    for logger in loggers:
        for handler in list(logger.handlers):
            handlers[id(handler)] = handler
    if logging.lastResort is not None:
        handlers[id(logging.lastResort)] = logging.lastResort
    return list(handlers.values())


@contextlib.contextmanager
def _suppressed_log_content():
    """Install ``_LogContentFilter`` on every log handler; remove it on exit.

    A handler whose ``handle`` skips the filters (Salt's
    ``DeferredStreamHandler`` queues records for later) gets an instance
    ``handle`` that filters first, removed again on exit.
    """
    content_filter = _LogContentFilter(log.name)
    installed = []
    try:
        for handler in _log_handlers():
            handler.addFilter(content_filter)
            # (had an instance ``handle``, that value): local state only, since
            # Salt's loader may re-execute this module's globals meanwhile.
            previous = ("handle" in handler.__dict__, handler.__dict__.get("handle"))
            wrapped = type(handler).handle is not logging.Handler.handle
            if wrapped:
                handler.handle = _filtering_handle(handler.handle, content_filter)
            installed.append((handler, wrapped, previous))
        yield
    finally:
        for handler, wrapped, (had_own_handle, own_handle) in installed:
            handler.removeFilter(content_filter)
            if wrapped:
                if had_own_handle:
                    handler.handle = own_handle
                else:
                    handler.__dict__.pop("handle", None)


def _filtering_handle(handle, content_filter):
    def filtering_handle(record):
        content_filter.filter(record)
        return handle(record)

    return filtering_handle


def _is_state_cache_path(path, cache_root):
    full = os.path.abspath(path)
    name = os.path.basename(full)
    return os.path.dirname(full) == cache_root and (name == "sls.p" or name.endswith(".cache.p"))


# ---------------------------------------------------------------------------
# Salt-callable functions


_REFUSAL_MESSAGES = {
    "execution_busy": "another managed apply is running on this minion",
    "not_ready": "this minion is not ready for managed applies; oduflow_job.capabilities says why",
    "unsupported_runtime": (
        f"managed applies need Salt {PINNED_SALT_VERSION} with multiprocessing enabled "
        "and the Salt internals this module was verified against"
    ),
    "forbidden_option": "oduflow_job takes no caller options, executors, returners or metadata",
    "parallel_refused": "a state of this role runs in parallel, which a managed apply refuses",
}


def _crash_point(name):
    """Test seam at the durable boundaries of DESIGN section 6; does nothing.

    Called at M1 (before the JID index), M2 (index written, request record
    not), M3 (claim committed, state not called), M5 (state returned, receipt
    not committed) and M6 (receipt committed, not yet returned); and for a
    refusal at R1 (decided, nothing written: before its JID index) and R2
    (refusal record committed, not yet returned). M4 is the state run itself;
    a death between a refusal's two writes leaves an index alone, which
    ``status`` answers ``unknown`` like M2. Crash tests replace it in a
    forked worker to SIGKILL it.
    """


def _answer(work, refused_retcode=0):
    """Run ``work``; return its answer (retcode 0), or an error answer (retcode 1).

    A ``refused`` answer gets ``refused_retcode``: 1 from ``run`` (the
    publication did not apply), 0 from ``status`` (a valid status answer).
    """
    try:
        answer = work()
    except ProtocolError as exc:
        __context__["retcode"] = 1
        return {"protocol": PROTOCOL, "error": exc.code, "message": exc.message}
    except Exception:
        log.exception("oduflow_job failed unexpectedly")
        __context__["retcode"] = 1
        return {
            "protocol": PROTOCOL,
            "error": "internal_error",
            "message": "oduflow_job failed unexpectedly; see the minion log",
        }
    # The inner state call wrote its own retcode into the shared __context__.
    __context__["retcode"] = refused_retcode if answer.get("status") == REFUSED else 0
    return answer


def _forbidden_option():
    return ProtocolError("forbidden_option", _REFUSAL_MESSAGES["forbidden_option"])


def _publication_is_plain(kwargs, fun, accepted_args):
    """True for a plain master publication of ``fun``; False for one that carries any option.

    Raises ``forbidden_option`` for a call that is not a master publication at
    all (``salt-call``: Salt sets ``__pub_tgt`` to "salt-call", adds
    ``__pub_pid`` and omits the other keys): its JID is not the master's, so
    nothing may ever be recorded under it.
    """
    if (
        not kwargs.keys() >= PUBLICATION_KEYS
        or "__pub_pid" in kwargs
        or kwargs.get("__pub_tgt") == "salt-call"
        or __opts__.get("__cli") == "salt-call"
    ):
        raise ProtocolError(
            "forbidden_option",
            "oduflow_job runs only as a job the master published (not through salt-call)",
        )
    user = kwargs["__pub_user"]
    return (
        kwargs.keys() == PUBLICATION_KEYS
        and _is_exactly(kwargs["__pub_fun"], fun)
        and any(_is_exactly(kwargs["__pub_arg"], args) for args in accepted_args)
        and _is_exactly(kwargs["__pub_tgt_type"], PUBLICATION_TGT_TYPE)
        and _is_exactly(kwargs["__pub_tgt"], [__opts__.get("id")])
        and _is_exactly(kwargs["__pub_ret"], "")
        and type(user) is str
        and user != ""
    )


def _is_exactly(value, expected):
    """Equal and of the same types all the way down (so ``True`` is never ``1``)."""
    if type(value) is not type(expected):
        return False
    if type(expected) is list:
        return len(value) == len(expected) and all(map(_is_exactly, value, expected))
    return value == expected


def _store_root():
    return __opts__.get(RECEIPT_DIR_OPTION, DEFAULT_RECEIPT_DIR)


def capabilities():
    """
    Report the receipt protocol this minion speaks and whether it can run managed applies.

    ``ready`` is true exactly when ``reasons`` is empty; ``reasons`` lists the
    failed readiness checks in the order of ``READINESS_REASONS``.

    CLI Example:

    .. code-block:: bash

        salt -L 'client-<uuid>' oduflow_job.capabilities
    """
    return _answer(_capabilities)


def _capabilities():
    import salt.version

    reasons = _readiness_reasons(include_store=True)
    return {
        "protocol": PROTOCOL,
        "module_version": __version__,
        "salt_version": salt.version.__version__,
        "module_sha256": _MODULE_SHA256 or _file_sha256(__file__),
        "ready": not reasons,
        "reasons": reasons,
    }


def run(request_id, profile, state_data_json, **kwargs):
    """
    Apply a profile once for a published request and return its reduced receipt.

    The JID is the publication's own (``__pub_jid``). The publication must be
    the master's plain one: exactly this minion as a ``list`` target, no
    returner, executor, metadata or caller keyword. A valid publication that
    is refused (options, not ready, another apply running, a parallel state)
    answers ``refused`` with its reason and leaves a refusal record, so every
    later delivery of that JID is refused the same way. ``state_data_json``
    is ``""`` for a fixed role and the canonical JSON text of the high data
    for ``custom``.

    CLI Example (the master runner publishes it this way through salt-api):

    .. code-block:: bash

        salt -L 'client-<uuid>' oduflow_job.run <request-uuid> configure ""
    """
    return _answer(lambda: _run(request_id, profile, state_data_json, kwargs), refused_retcode=1)


def _run(request_id, profile, state_data_json, kwargs):
    plain = _publication_is_plain(kwargs, "oduflow_job.run", ([request_id, profile, state_data_json],))
    try:
        binding, high_data = _run_binding(request_id, profile, state_data_json, kwargs["__pub_jid"])
    except ProtocolError:
        if not plain:
            raise _forbidden_option() from None
        raise
    reason = _runtime_refusal() if plain else "forbidden_option"
    with _Store.open(_store_root(), create=True) as store:
        # Lock order: the request lock first, then the execution lock, each
        # attempt non-blocking, so no process ever waits on a lock while it
        # holds another (no cycle). Taking the request lock first means a
        # duplicate delivery of this publication can never mistake its own
        # twin, between two lock acquisitions, for another apply: whoever
        # holds this request's lock is a worker of this very request.
        try:
            request_lock = store.lock_without_waiting_on_a_worker(binding["request_id"] + ".lock")
        except BlockingIOError:
            # A living worker of this request answers for it: record nothing.
            refusal = reason or "execution_busy"
            raise ProtocolError(refusal, _REFUSAL_MESSAGES[refusal]) from None
        try:
            if reason is not None:
                return _refuse(store, binding, reason)
            try:
                execution_lock = store.lock("execution.lock", blocking=False)
            except BlockingIOError:
                # Held by a worker of another request (every holder took its
                # own request lock first): busy for good for this JID.
                return _refuse(store, binding, "execution_busy")
            try:
                return _apply(store, binding, high_data)
            finally:
                os.close(execution_lock)
        finally:
            os.close(request_lock)


def _run_binding(request_id, profile, state_data_json, jid):
    binding = {
        "minion_id": _validate_minion_id(__opts__.get("id")),
        "request_id": _validate_request_id(request_id),
        "jid": _validate_jid(jid),
        "profile": _validate_profile(profile),
    }
    high_data, binding["state_digest"] = _check_state_data(profile, state_data_json)
    return binding, high_data


def _apply(store, binding, high_data):
    """Holding both locks: claim, run the state, commit the receipt (or refuse a parallel role)."""
    request_id = binding["request_id"]
    store.remove_stale_temps(request_id)
    index, record = _read_evidence(store, binding)
    if index is not None or record is not None:
        return _answer_from_evidence(record)
    apply = _ManagedApply(store, binding, __opts__["cachedir"])
    result = _call_state(apply, high_data)
    if apply.failure is not None:
        raise apply.failure
    if apply.refusal is not None:
        return apply.refusal
    if not apply.claimed:
        # The run ended before any chunk existed (render or compile error,
        # a conflicting state job): no state ran; the claim still precedes
        # the receipt, which says unknown.
        apply.claim()
    _crash_point("M5")
    receipt = {"protocol": PROTOCOL, **binding, **_reduce_state_result(result)}
    store.write("requests", request_id + ".json", receipt, request_id)
    _crash_point("M6")
    return receipt


def _answer_from_evidence(record):
    """What ``run`` answers for a publication that already left evidence."""
    if record is not None and record["status"] in FINAL_STATUSES:
        return record
    raise ProtocolError(
        "already_claimed",
        "this request was already claimed and is never executed again; ask oduflow_job.status for its outcome",
    )


def _refuse(store, binding, reason):
    """Under the request lock: refuse a valid publication for good, unless it already left evidence."""
    index, record = _read_evidence(store, binding)
    if index is not None or record is not None:
        return _answer_from_evidence(record)
    return _commit_refusal(store, binding, reason)


def _commit_refusal(store, binding, reason):
    """R1, the JID index, the refusal record, R2: the same atomic writes as a claim, under the request lock."""
    refused = {"protocol": PROTOCOL, **binding, "status": REFUSED, "passed": 0, "total": 0, "reason": reason}
    _crash_point("R1")
    store.write("jids", binding["jid"] + ".json", {"protocol": PROTOCOL, **binding}, binding["request_id"])
    store.write("requests", binding["request_id"] + ".json", refused, binding["request_id"])
    _crash_point("R2")
    return refused


def _call_state(apply, high_data):
    """The raw state return, or None when the state function raised or the gate stopped it."""
    binding = apply.binding
    with _shims_installed(apply):
        try:
            if high_data is None:
                # state.sls hands __pub_jid to HighState, which makes it State.jid.
                return __salt__["state.sls"](
                    PROFILE_ROLES[binding["profile"]],
                    __pub_jid=binding["jid"],
                    **STATE_CALL_OPTIONS,
                )
            # state.high builds its State without a JID; nothing it could
            # publish under one (events, parallel results) survives the shims.
            return __salt__["state.high"](high_data, **STATE_CALL_OPTIONS)
        except _StopApply:
            return None
        except Exception:  # noqa: BLE001 - a state function that raised proves nothing: unknown
            return None


def status(request_id, jid, profile, state_digest="", **kwargs):
    """
    Report what this minion knows about one published request.

    Answers a status answer (``not_started``, ``running``, ``unknown``,
    ``succeeded``, ``failed``, or ``refused`` with its reason). Evidence bound
    to another request, JID, profile or digest is a ``binding_conflict``
    error; a record without its JID index is ``inconsistent_evidence``; an
    unsafe or malformed store is an error, never ``not_started``. Like ``run``,
    it answers only the master's plain publication.

    CLI Example:

    .. code-block:: bash

        salt -L 'client-<uuid>' oduflow_job.status <request-uuid> <jid> configure ""
    """
    return _answer(lambda: _status(request_id, jid, profile, state_digest, kwargs))


def _status(request_id, jid, profile, state_digest, kwargs):
    accepted = [[request_id, jid, profile, state_digest]]
    if _is_exactly(state_digest, ""):
        accepted.append([request_id, jid, profile])  # the default digest of a fixed role
    if not _publication_is_plain(kwargs, "oduflow_job.status", accepted):
        raise _forbidden_option()
    binding = {
        "minion_id": _validate_minion_id(__opts__.get("id")),
        "request_id": _validate_request_id(request_id),
        "jid": _validate_jid(jid),
        "profile": _validate_profile(profile),
        "state_digest": _validate_state_digest(profile, state_digest),
    }
    answer = {"protocol": PROTOCOL, **binding, "status": "not_started", "passed": 0, "total": 0}
    store = _Store.open(_store_root(), create=False)
    if store is None:
        return answer
    with store:
        index, record = _read_evidence(store, binding)
        if index is None and record is None:
            return answer
        deadline = time.monotonic() + STATUS_REFUSAL_WAIT_SECONDS
        while True:
            if record is not None and record["status"] in FINAL_STATUSES:
                return record
            # Evidence without a final record. The worker holds the request
            # lock from before its first write until after its last, so a
            # busy lock means it is alive. A free lock may also mean it
            # committed and released since the read above: re-read under the
            # lock (held shared, so no worker can start in between) before
            # answering unknown.
            with store.probe_lock(binding["request_id"] + ".lock") as busy:
                if not busy:
                    _index, record = _read_evidence(store, binding)
                    if record is not None and record["status"] in FINAL_STATUSES:
                        return record
                    answer["status"] = "unknown"
                    return answer
            # A running claim under a busy lock is an apply: running. A JID
            # index alone under a busy lock is a worker between its first two
            # writes, and a refusal's second write may be its refusal record:
            # answering running now and refused a moment later would make the
            # master quarantine a request that never ran. Wait for the record
            # or the lock, within the bound (see STATUS_REFUSAL_WAIT_SECONDS).
            if record is not None or time.monotonic() >= deadline:
                answer["status"] = "running"
                return answer
            time.sleep(_STATUS_REFUSAL_PAUSE)
            _index, record = _read_evidence(store, binding)
