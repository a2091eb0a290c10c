"""The runtime example of README.md and libs/agentworks-runtime/README.md runs as
written (R1, T2, G3): against a real suite (`agentworks up`) on ports other than the
defaults, the shell block registers the crew and saves a runtime credential, the Python
block is the runtime, and a message sent with the CLI gets its explicit reply. The two
READMEs carry the same blocks, so one run checks both, and neither can go stale.
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

from tests.test_end_to_end import Up, cli, free_port_block, read_texts

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
