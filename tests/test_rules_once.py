"""Each limit, rule and refusal wording has one definition (issue 36): a grep of the
source (libs, services and tools; generated stubs and tests left out) for copies.

A field rule's number is stated once, on the proto field (buf.validate); `make proto`
writes it to the generated `agentworks.proto_limits`, which `agentworks.core.limits`
names for code. The other limits live in `agentworks.core.limits`, the checks and their
wordings in `agentworks.core.checks`; everything else imports them. Docstrings and
comments may mention a number; code and the strings people read (help texts, tool
descriptions, error messages) may not restate it.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMITS = "libs/agentworks-core/src/agentworks/core/limits.py"
# Generated from the protos' rules by `make proto` (like the stubs): not a copy.
PROTO_LIMITS = "libs/agentworks-proto/src/agentworks/proto_limits.py"
CHECKS = "libs/agentworks-core/src/agentworks/core/checks.py"


@functools.cache
def _sources() -> dict[str, ast.Module]:
    found: dict[str, ast.Module] = {}
    for top in ("libs", "services", "tools"):
        for path in sorted((REPO / top).glob("*/src/**/*.py")):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")) or path.match(PROTO_LIMITS):
                continue
            found[str(path.relative_to(REPO))] = ast.parse(path.read_text(), str(path))
    return found


def _docstrings(tree: ast.Module) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _ints(value: int) -> list[str]:
    """Where the integer `value` is written in code."""
    return [
        f"{name}:{node.lineno}"
        for name, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value == value
    ]


def _strings(pattern: str) -> list[str]:
    """Where a string in code (not a docstring) matches `pattern`; f-strings by their
    literal parts."""
    regex = re.compile(pattern)
    hits = []
    for name, tree in _sources().items():
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and regex.search(node.value)
            ):
                hits.append(f"{name}:{node.lineno}")
    return hits


def _assigned(pattern: str) -> list[str]:
    """Where a module-level name matching `pattern` is given a value (not imported)."""
    regex = re.compile(pattern)
    hits = []
    for name, tree in _sources().items():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign) and node.value is not None:
                targets = [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and regex.search(target.id):
                    hits.append(f"{name}:{target.id}")
    return hits


def _functions(name: str) -> list[str]:
    return [
        path
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]


def test_the_wait_cap_is_written_once_C7_F7():
    """C7 F7: the 25 s long-poll cap is a rule of the protos' wait_seconds fields, which
    limits.MAX_WAIT_SECONDS reads: no literal 25 in code, no "0-25" or "up to 25" in help
    texts and descriptions."""
    assert _ints(25) == []
    assert _strings(r"\b0-25\b|up to 25\b|--wait 25\b") == []


def test_upload_chunk_and_webhook_body_default_are_defined_once_F8_S5():
    """F8 S5: the upload chunk size and the webhook body limit's default are in limits
    only; the client, the gateway and the scheduler import them."""
    assert _assigned(r"UPLOAD_CHUNK") == [f"{LIMITS}:UPLOAD_CHUNK_BYTES"]
    assert _assigned(r"WEBHOOK.*BODY") == [
        f"{LIMITS}:MAX_WEBHOOK_BODY_BYTES",
        f"{LIMITS}:WEBHOOK_BODY_BYTES_DEFAULT",
    ]


def test_a_retry_key_has_one_limit_one_check_and_one_wording_C4():
    """C4: one limit (MAX_SUBMISSION_ID, 200 characters), a rule of each retry-key field
    in the protos (tests/test_contract_rules.py checks every one): no length check of a
    submission_id or idempotency_key in code, check_retry_key holds only the NUL rule."""
    assert _assigned(r"^MAX_.*(SUBMISSION_ID|IDEMPOTENCY_KEY)") == [
        f"{LIMITS}:MAX_SUBMISSION_ID",
        f"{LIMITS}:MAX_IDEMPOTENCY_KEY",  # = MAX_SUBMISSION_ID
    ]
    assert _functions("check_retry_key") == [CHECKS]
    assert _functions("check_submission_id") == []
    length_checks = [
        f"{name}:{node.lineno}"
        for name, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in {"submission_id", "idempotency_key", "key"}
        and name != CHECKS
    ]
    assert length_checks == []
    assert _strings(r"(submission_id|idempotency_key) is (longer|\{)") == []


def test_request_hash_has_one_algorithm_C4():
    """C4: one request_hash (sorted JSON, in checks); the scheduler's old repr hash is
    kept only to match rows stored before, never to store."""
    assert _functions("request_hash") == [CHECKS]
    assert _functions("legacy_request_hash") == [
        "services/scheduler/src/agentworks_scheduler/service/rules.py"
    ]


def test_the_nul_refusal_is_worded_once_P6():
    """P6: one wording of the NUL refusal (checks.nul_refusal), used by check_no_nul and
    the functions service's list of what cannot be stored."""
    hits = _strings(r"NUL character \(")  # the refusal's shape; hints may say "NUL"
    assert len(hits) == 1 and hits[0].startswith(f"{CHECKS}:"), hits
    assert _functions("nul_refusal") == [CHECKS]


def test_a_reused_retry_key_is_refused_in_one_wording_C4():
    """C4: "was already used for" is built by checks.key_reused alone (through
    checks.is_retry where a stored request hash is compared)."""
    hits = _strings(r"already used")
    assert len(hits) == 1 and hits[0].startswith(f"{CHECKS}:"), hits
    assert _functions("key_reused") == [CHECKS]
    assert _functions("submission_conflict") == []


def _folded(node: ast.AST, names: dict[str, int]) -> int | None:
    """An integer a constant expression in code comes to: a literal, or a product of
    literals and KIB/MIB (`64 * KIB`, `64 * 1024`); None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _folded(node.left, names), _folded(node.right, names)
        if left is not None and right is not None:
            return left * right
    return None


def _read_from_protos() -> list[str]:
    """The names limits.py gives numbers the protos state (`NAME = rules.<GENERATED>`)."""
    tree = _sources()[LIMITS]
    return [
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
        and any(
            isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "rules"
            for n in ast.walk(node.value)
        )
    ]


def test_a_number_the_protos_state_is_read_not_copied_P6():
    """P6: a field rule's number is written once, on the proto field; limits.py names it
    from the generated proto_limits, and no other module defines a limit of that name.
    No code restates a distinctive stated number (not a power of two, so not a common
    buffer size) as a literal or a constant product (`400 * 86400`)."""
    from agentworks import proto_limits

    named = _read_from_protos()
    assert len(named) >= 15, named  # text, keys, payload, counts, pages, waits, notes ...
    for name in named:
        assert _assigned(rf"^{name}$") == [f"{LIMITS}:{name}"]
    stated = {v for n, v in vars(proto_limits).items() if n.isupper()}
    distinctive = {v for v in stated if v >= 1000 and v & (v - 1)}
    assert distinctive  # 400 days in seconds, at least
    names = {"KIB": 1024, "MIB": 1024 * 1024}
    copies = []
    for path, tree in _sources().items():
        parts = {
            id(child)
            for node in ast.walk(tree)
            if isinstance(node, ast.BinOp)
            for child in (node.left, node.right)
        }
        for node in ast.walk(tree):
            if id(node) not in parts and _folded(node, names) in distinctive:
                copies.append(f"{path}:{getattr(node, 'lineno', '?')}")
    assert copies == []


def _proto_rule_checks() -> list[str]:
    """Where messaging, functions or the scheduler compare a value with a limit a proto
    rule states (a name limits.py reads from proto_limits), or pass one to a check."""
    named = set(_read_from_protos())
    hits = []
    for path, tree in _sources().items():
        if not path.startswith(
            ("services/messaging/", "services/functions/", "services/scheduler/")
        ):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare | ast.Call):
                continue
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            hits += [f"{path}:{name}" for name in sorted(names & named)]
    return sorted(set(hits))


def test_a_field_rule_is_checked_by_the_validator_not_again_by_a_service_P6():
    """P6: a field's proto rule (a size, a range, a count, required, a pattern) is checked
    once, by the interceptor's validator, before the handler runs; the services the
    interceptor fronts do not check it again, by comparing with the rule's number or by
    bounded(). Left: MAX_DELAY bounds `at`, a timestamp no field rule can bound (now + 400
    days), and the scheduler pages through targets MAX_LIST_PAGE at a time."""
    assert _proto_rule_checks() == [
        "services/scheduler/src/agentworks_scheduler/deliveries.py:MAX_LIST_PAGE",
        "services/scheduler/src/agentworks_scheduler/service/rules.py:MAX_DELAY",
        "services/scheduler/src/agentworks_scheduler/service/schedules.py:MAX_DELAY",
    ]
    bounded_calls = [
        path
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "bounded"
        and path.startswith(("services/messaging/", "services/functions/", "services/scheduler/"))
    ]
    # The execution lease's bounds are the functions service's settings, not a proto rule.
    assert bounded_calls == ["services/functions/src/agentworks_functions/service/base.py"]
    assert _functions("check_name") == []
    assert _functions("check_text") == [
        "services/messaging/src/agentworks_messaging/service/rules.py"  # NUL, parts, JSON size
    ]
