"""The runtime example of README.md and libs/agentworks-runtime/README.md runs as
written (R1, T2, G3): against a real suite (`agentworks up`) on ports other than the
defaults, the shell block registers the crew and saves a runtime credential, the Python
block is the runtime, and a message sent with the CLI gets its explicit reply. The two
READMEs carry the same blocks, so one run checks both, and neither can go stale.

The worked examples of docs/messaging.md and docs/functions.md run as written too, with
what a runtime and a caller really hold (a runtime credential; an API token through the
gateway): their shell blocks, files and scripts, on one suite.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading

import pytest

from agentworks.server.testing import free_port_block
from tests.test_end_to_end import Up, cli, read_texts

pytestmark = pytest.mark.timeout(180)

ROOT = pathlib.Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", ROOT / "libs" / "agentworks-runtime" / "README.md"]
VENV = pathlib.Path(sys.executable).parent.parent
# The ports the run line names (`make run AGENTWORKS_HTTP_PORT=7880 AGENTWORKS_BASE_PORT=7800`).
DOC_HTTP_PORT, DOC_BASE_PORT = "7880", "7800"


def example(readme: pathlib.Path) -> tuple[str, str, str]:
    """(setup shell block, runtime Python block, run shell block) of a README."""
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", readme.read_text(), re.M | re.S)

    def find(language: str, needle: str) -> str:
        found = [text for lang, text in blocks if lang == language and needle in text]
        assert len(found) == 1, f"{readme}: {len(found)} {language} blocks with {needle!r}"
        return found[0]

    return (
        find("bash", "agentworks targets register crew:mycrew"),
        find("python", "TurnWorker(MESSAGING"),
        find("bash", "python mycrew_bot.py"),
    )


def test_the_readme_runtime_example_runs_as_written_on_non_default_ports_R1_T2_G3(
    tmp_path: pathlib.Path,
):
    """R1 T2 G3: both READMEs' example, as written: `agentworks targets register` and
    `runtimes credentials create` (the registration step), the runtime started with the
    run line (its ports replaced by this suite's: random, never the defaults), and
    `messages send` to crew:mycrew answered "got: hello" by that runtime; the runtime
    logs no `worker.target_not_registered`."""
    setup, code, run = example(READMES[0])
    assert example(READMES[1]) == (setup, code, run), "the READMEs' examples differ"
    base_port = free_port_block(5)
    http_port = base_port + 4
    assert str(http_port) != "8080" and str(base_port) != "50051"
    (tmp_path / ".venv").symlink_to(VENV)  # `source .venv/bin/activate`, as in a clone
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    up = Up(tmp_path, base_port, http_port)
    bot: subprocess.Popen[str] | None = None
    try:
        up.wait_ready()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", setup],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        credential = (tmp_path / ".agentworks" / "mycrew-credential").read_text().strip()
        assert credential.startswith("awr_"), credential
        (tmp_path / "mycrew_bot.py").write_text(code)
        command = run.split("&\n", 1)[0].replace("\\\n", " ")
        command = command.replace(DOC_HTTP_PORT, str(http_port))
        command = command.replace(DOC_BASE_PORT, str(base_port))
        assert f":{http_port} " in command and f":{base_port} " in command, command
        bot = subprocess.Popen(
            ["bash", "-c", command],  # one simple command: bash execs it
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(bot.stdout or ()), daemon=True).start()
        receipt = cli(tmp_path, "messages", "send", "--crew", "mycrew", "hello")
        try:
            replies = read_texts(tmp_path, receipt["inbox_id"], 1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the runtime said:\n{''.join(lines)}") from None
        assert replies == ["got: hello"], "".join(lines)
        assert not [line for line in lines if "target_not_registered" in line], lines
    finally:
        if bot is not None:
            bot.send_signal(signal.SIGTERM)
            bot.wait(30)
            if bot.stdout is not None:
                bot.stdout.close()
        up.stop()


DOCS = ROOT / "docs"
# Ports as the docs' run lines name them: 78xx is the base port + xx, 7880 the gateway's.
DOC_PORT = re.compile(r"\b78(\d\d)\b")
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")


def doc_blocks(doc: pathlib.Path, *wanted: tuple[str, str]) -> list[str]:
    """The one block of each (language, needle) in `doc`, in order."""
    blocks = re.findall(r"^```(\w+)\n(.*?)^```$", doc.read_text(), re.M | re.S)
    found = []
    for language, needle in wanted:
        texts = [text for lang, text in blocks if lang == language and needle in text]
        assert len(texts) == 1, f"{doc}: {len(texts)} {language} blocks with {needle!r}"
        found.append(texts[0])
    return found


def doc_run_line(doc: pathlib.Path, script: str, base_port: int, http_port: int) -> dict[str, str]:
    """The variables the doc's "on other ports" run line of `script` sets, its ports
    turned into this suite's."""
    prose = " ".join(doc.read_text().split())
    line = re.search(rf"`((?:AGENTWORKS_\w+=\S+ )+)python {re.escape(script)}`", prose)
    assert line, f"{doc}: no `AGENTWORKS_...=... python {script}` run line"

    def port(match: re.Match[str]) -> str:
        offset = int(match.group(1))
        return str(http_port if offset == 80 else base_port + offset)

    pairs = (item.split("=", 1) for item in line.group(1).split())
    return {name: DOC_PORT.sub(port, value) for name, value in pairs}


def run_doc_example(
    cwd: pathlib.Path, env: dict[str, str], setup: str, script: str, variables: dict[str, str]
) -> list[str]:
    """The doc's setup block (bash, as written), then its script; the lines it printed."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", setup],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = subprocess.run(
        ["python", script],
        cwd=cwd,
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # What the script prints, without the runtime's log lines (structlog's, on stdout).
    return [line for line in ran.stdout.splitlines() if not LOG_LINE.match(line)]


def test_the_messaging_and_functions_worked_examples_run_as_written_A1_T2_C2_C6_C7_F4_F10(
    tmp_path: pathlib.Path,
):
    """A1 T2 C2 C6 C7 F4 F10 F8: the worked examples of docs/messaging.md and
    docs/functions.md, as written, against one real suite on ports other than the
    defaults (the docs' run lines, their ports replaced): the operator's shell block
    (register, an API token per caller, a runtime credential per runtime), then the
    script, in which callers go through the gateway with their API token and the runtime
    acts with identities exchanged for its credential. Messaging: Alice's send is
    claimed by agent:tickets/bot, whose reply she reads. Functions: the owner declares,
    the command runner runs summarize.py in the sandbox, Alice's call completes with
    {"words": 4} and she reads words.txt."""
    messaging_doc, functions_doc = DOCS / "messaging.md", DOCS / "functions.md"
    tickets_setup, tickets = doc_blocks(
        messaging_doc,
        ("bash", "agentworks runtimes credentials create --principal agent:tickets/bot"),
        ("python", "CredentialIdentity(GATEWAY"),
    )
    summarize, commands, reports_setup, reports = doc_blocks(
        functions_doc,
        ("python", 'os.environ["FUNCTION_RESULT_FILE"]'),
        ("json", '{"summarize": "python3'),
        ("bash", "agentworks runtimes credentials create --principal agent:reports/runner"),
        ("python", "ExecutionWorker(\n"),
    )
    base_port = free_port_block(5)
    http_port = base_port + 4
    assert str(http_port) != "8080" and str(base_port) != "50051"
    (tmp_path / ".venv").symlink_to(VENV)  # `source .venv/bin/activate`, as in a clone
    (tmp_path / "tickets.py").write_text(tickets)
    (tmp_path / "reports.py").write_text(reports)
    (tmp_path / "commands.json").write_text(commands)
    (tmp_path / "reports-project").mkdir()
    (tmp_path / "reports-project" / "summarize.py").write_text(summarize)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    up = Up(tmp_path, base_port, http_port)
    try:
        up.wait_ready()
        variables = doc_run_line(messaging_doc, "tickets.py", base_port, http_port)
        assert variables == {
            "AGENTWORKS_GATEWAY_URL": f"http://127.0.0.1:{http_port}",
            "AGENTWORKS_MESSAGING_ADDRESS": f"127.0.0.1:{base_port}",
        }, variables
        out = run_doc_example(tmp_path, env, tickets_setup, "tickets.py", variables)
        assert out == ["agent:tickets/bot On it — I'll post the summary here."], out
        # What the doc says of another crew's turns: the credential may not claim them.
        other = tickets.replace('CREW = "crew:tickets"', 'CREW = "crew:demo"')
        assert other != tickets
        (tmp_path / "other.py").write_text(other)
        refused = subprocess.run(
            ["python", "other.py"],
            cwd=tmp_path,
            env={**env, **variables},
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert refused.returncode != 0 and "PermissionDenied" in refused.stderr, refused.stderr

        variables = doc_run_line(functions_doc, "reports.py", base_port, http_port)
        assert variables == {
            "AGENTWORKS_GATEWAY_URL": f"http://127.0.0.1:{http_port}",
            "AGENTWORKS_FUNCTIONS_ADDRESS": f"127.0.0.1:{base_port + 1}",
        }, variables
        out = run_doc_example(tmp_path, env, reports_setup, "reports.py", variables)
        assert out == ["completed {'words': 4}", "['to', 'be', 'or', 'not']"], out
    finally:
        up.stop()
