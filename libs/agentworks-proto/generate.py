"""`make proto`: the stubs, the limits module and docs/limits.md from proto/, in one pass.

protoc (grpc_tools) compiles proto/ into the stubs; buf/validate/validate.proto comes
from the installed protovalidate package's own descriptor (handed to protoc as a
descriptor set), so the rules are compiled against exactly the validator that checks
them. From the compiled descriptors, every field rule (`buf.validate`) is written out as
a plain constant (`agentworks/proto_limits.py`, which `agentworks.core.limits` reads)
and as one table per method (docs/limits.md). `--check` writes everything to a scratch
directory and fails when a committed file differs (`make check-proto`).

Usage: python libs/agentworks-proto/generate.py [--check]
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc_tools
from google.protobuf import descriptor_pb2, duration_pb2, field_mask_pb2, timestamp_pb2
from grpc_tools import protoc

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
# Registers buf.validate's extensions before any descriptor is parsed, so that the rules
# in the compiled descriptors' options are read as such (not as unknown fields).
from buf.validate import validate_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto"
STUBS = ROOT / "libs/agentworks-proto/src"
LIMITS = "agentworks/proto_limits.py"
DOCS = ROOT / "docs/limits.md"
VALIDATE = "buf/validate/validate.proto"

# The FieldRules kinds whose numbers are limits: (kind, rule) -> the unit of the number.
UNITS = {
    ("string", "max_len"): "characters",
    ("string", "min_len"): "characters",
    ("string", "len"): "characters",
    ("string", "max_bytes"): "bytes of UTF-8",
    ("string", "min_bytes"): "bytes of UTF-8",
    ("bytes", "max_len"): "bytes",
    ("bytes", "min_len"): "bytes",
    ("repeated", "max_items"): "items",
    ("repeated", "min_items"): "items",
}
INTEGER_KINDS = ("int32", "int64", "uint32", "uint64", "sint32", "sint64")


def _validate_descriptor_set() -> bytes:
    """buf/validate/validate.proto and its imports, as protovalidate ships them."""
    from protovalidate._gen.buf.validate import validate_pb

    files = descriptor_pb2.FileDescriptorSet()
    for module in (descriptor_pb2, duration_pb2, field_mask_pb2, timestamp_pb2):
        module.DESCRIPTOR.CopyToProto(files.file.add())
    files.file.add().MergeFromString(validate_pb._DESC.proto.to_binary())
    return files.SerializeToString()


def compile_protos(out: Path) -> descriptor_pb2.FileDescriptorSet:
    """Run protoc over proto/ into `out`; the compiled descriptors."""
    protos = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    with tempfile.TemporaryDirectory() as scratch:
        given = Path(scratch, "validate.binpb")
        given.write_bytes(_validate_descriptor_set())
        compiled = Path(scratch, "compiled.binpb")
        well_known = Path(grpc_tools.__file__).parent / "_proto"
        status = protoc.main(
            [
                "protoc",
                f"-I{PROTO}",
                f"-I{well_known}",
                f"--descriptor_set_in={given}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                f"--descriptor_set_out={compiled}",
                *protos,
            ]
        )
        if status != 0:
            sys.exit(f"protoc failed ({status})")
        return descriptor_pb2.FileDescriptorSet.FromString(compiled.read_bytes())


# -- the rules, read from the descriptors -------------------------------------------------


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


class Rule:
    """One number a field rule states: `text` of messaging's SendRequest, at most 65536
    bytes."""

    def __init__(self, package: str, message: str, field: str, kind: str, rule: str, value: int):
        self.package, self.message, self.field = package, message, field
        self.kind, self.rule, self.value = kind, rule, value

    @property
    def unit(self) -> str:
        return UNITS.get((self.kind, self.rule.removeprefix("items_")), "")

    @property
    def constant(self) -> str:
        service = self.package.split(".")[1].upper()
        return f"{service}_{_snake(self.message)}_{self.field.upper()}_{self.rule.upper()}"


def _field_rules(field: descriptor_pb2.FieldDescriptorProto) -> Iterator[tuple[str, str, int]]:
    """(kind, rule, number) of each numeric rule on a field."""
    if not field.options.HasExtension(validate_pb2.field):
        return
    rules = field.options.Extensions[validate_pb2.field]
    kind = rules.WhichOneof("type")
    if kind is None:
        return
    typed = getattr(rules, kind)
    for descriptor, value in typed.ListFields():
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        yield kind, descriptor.name, value
    # A repeated field's rules on each item: (the item's kind, "items_<rule>", number).
    item_kind = typed.items.WhichOneof("type") if kind == "repeated" else None
    if item_kind is not None:
        for descriptor, value in getattr(typed.items, item_kind).ListFields():
            if isinstance(value, int) and not isinstance(value, bool):
                yield item_kind, f"items_{descriptor.name}", value


def read_rules(files: descriptor_pb2.FileDescriptorSet) -> list[Rule]:
    found = []
    for file in files.file:
        if not file.package.startswith("agentworks."):
            continue
        for message in file.message_type:
            for field in message.field:
                for kind, rule, value in _field_rules(field):
                    found.append(Rule(file.package, message.name, field.name, kind, rule, value))
    return found


# -- the generated files ------------------------------------------------------------------


def limits_module(rules: list[Rule]) -> str:
    lines = [
        '"""Every number a field rule in proto/ states (buf.validate), generated by `make proto`',
        "from the compiled descriptors: do not edit; change the proto. `agentworks.core.limits`",
        "names the ones code reads. Characters are Unicode code points, bytes are of UTF-8",
        '(strings) or as sent (bytes fields); docs/limits.md lists them by method."""',
        "",
    ]
    for rule in rules:
        where = f"{rule.package}.{rule.message}.{rule.field}: {rule.kind}.{rule.rule}"
        unit = f", in {rule.unit}" if rule.unit else ""
        lines.append(f"# {where}{unit}")
        lines.append(f"{rule.constant} = {rule.value}")
    return "\n".join(lines) + "\n"


def _say(field: descriptor_pb2.FieldDescriptorProto) -> str:
    """A field's rules in words: "at most 65,536 bytes", "0 to 25"."""
    rules = {rule: value for _, rule, value in _field_rules(field)}
    kinds = {kind for kind, _, _ in _field_rules(field)}
    said = []
    if "gte" in rules and "lte" in rules:
        zero = validate_pb2.IGNORE_IF_ZERO_VALUE
        ignore = field.options.Extensions[validate_pb2.field].ignore == zero
        said.append(
            f"{rules.pop('gte'):,} to {rules.pop('lte'):,}"
            + (" (0: the default)" if ignore else "")
        )
    for rule, value in rules.items():
        each = "each " if rule.startswith("items_") else ""
        rule = rule.removeprefix("items_")
        unit = next((UNITS[(k, rule)] for k in kinds if (k, rule) in UNITS), "")
        if unit:
            side = (
                "at most" if rule.startswith("max") else "at least" if "min" in rule else "exactly"
            )
            said.append(f"{each}{side} {value:,} {unit.rstrip('s') if value == 1 else unit}")
        else:
            names = {"gte": "≥", "gt": ">", "lte": "≤", "lt": "<", "const": "="}
            said.append(f"{names.get(rule, rule)} {value:,}")
    if field.options.HasExtension(validate_pb2.field):
        typed = field.options.Extensions[validate_pb2.field]
        if typed.WhichOneof("type") == "string" and typed.string.pattern:
            said.append(f"matches `{typed.string.pattern}`")
        if typed.WhichOneof("type") == "repeated" and typed.repeated.unique:
            said.append("no two the same")
    return ", ".join(said)


def docs_page(files: descriptor_pb2.FileDescriptorSet) -> str:
    messages = {
        f".{f.package}.{m.name}": m
        for f in files.file
        if f.package.startswith("agentworks.")
        for m in f.message_type
    }
    out = [
        "# Field limits",
        "",
        "Generated by `make proto` from the `buf.validate` rules in `proto/` (do not edit:",
        "change the proto; `make check-proto` fails when this page is stale). Every request is",
        "checked against them by one validator in the server interceptor (protovalidate),",
        "after the caller's identity and before the handler; a refusal is INVALID_ARGUMENT",
        "with the ErrorInfo reason `FIELD_RULE` and metadata naming the `field`, the `rule`",
        "and the `limit`. Characters are Unicode code points; bytes are of UTF-8 (strings) or",
        "as sent (bytes fields). Patterns are RE2 (linear time: no input makes them slow).",
        "Rules that need stored state (retry keys, running limits) are the services' own.",
        "",
    ]
    for file in files.file:
        if not file.package.startswith("agentworks."):
            continue
        for service in file.service:
            section = [f"## {file.package}.{service.name}", ""]
            for method in service.method:
                rows = list(_rows(messages, method.input_type, "", set()))
                if not rows:
                    continue
                section += [f"### {method.name}", "", "| field | rule |", "| --- | --- |"]
                section += [f"| `{path}` | {text} |" for path, text in rows]
                section.append("")
            if len(section) > 2:
                out += section
    return "\n".join(out).rstrip("\n") + "\n"


def _rows(
    messages: dict[str, descriptor_pb2.DescriptorProto], name: str, prefix: str, seen: set[str]
) -> Iterator[tuple[str, str]]:
    message = messages.get(name)
    if message is None or name in seen:
        return
    for field in message.field:
        path = prefix + field.name
        said = _say(field)
        if said:
            yield path, said
        if field.type == field.TYPE_MESSAGE:
            repeated = field.label == field.LABEL_REPEATED
            yield from _rows(
                messages, field.type_name, path + ("[]." if repeated else "."), {*seen, name}
            )


def generate(out: Path, docs: Path) -> None:
    files = compile_protos(out)
    rules = read_rules(files)
    Path(out, LIMITS).write_text(limits_module(rules))
    docs.write_text(docs_page(files))


def _stubs(root: Path) -> set[str]:
    names = {"_pb2.py", "_pb2.pyi", "_pb2_grpc.py"}
    return {
        str(p.relative_to(root))
        for p in (root / "agentworks").rglob("*.py*")
        if "__pycache__" not in p.parts and any(p.name.endswith(n) for n in names)
    } | {LIMITS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a committed file is stale")
    args = parser.parse_args()
    if not args.check:
        for name in _stubs(STUBS):
            Path(STUBS, name).unlink(missing_ok=True)
        generate(STUBS, DOCS)
        return
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch, "stubs")
        out.mkdir()
        docs = Path(scratch, "limits.md")
        generate(out, docs)
        stale = [
            n
            for n in sorted(_stubs(out))
            if not filecmp.cmp(out / n, STUBS / n, shallow=False)
            if (STUBS / n).exists()
        ] + [n for n in sorted(_stubs(out)) if not (STUBS / n).exists()]
        extra = sorted(_stubs(STUBS) - _stubs(out))
        if not DOCS.exists() or not filecmp.cmp(docs, DOCS, shallow=False):
            stale.append(os.path.relpath(DOCS, ROOT))
    for name in stale:
        print(f"stale: {name} (run make proto)")
    for name in extra:
        print(f"stub without a proto: {name}")
    if stale or extra:
        sys.exit(1)
    print("stubs, limits and docs/limits.md are up to date")


if __name__ == "__main__":
    main()
