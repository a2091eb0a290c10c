"""The CLI at a terminal (a real pseudo-terminal) and in a pipe: colour and NO_COLOR,
tables that fit the terminal's width, local times, the live state of `call --wait`,
Ctrl-C, shell completion, --version and "did you mean" (G3, issue 26)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import sys
import termios
from datetime import datetime
from importlib import metadata
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.fixtures.gateway import WITH_CTRL_C

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Terminal:
    """`agentworks ARGS` with a pseudo-terminal `columns` wide as stdin, stdout and stderr."""

    def __init__(self, *args: str, env: dict[str, str], cwd: Path, columns: int = 80) -> None:
        self.args, self.env, self.cwd, self.columns = args, env, cwd, columns
        self.output = ""

    async def __aenter__(self) -> Terminal:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, self.columns, 0, 0))
        base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}
        for name in ("COLUMNS", "NO_COLOR", "TERM"):
            base.pop(name, None)
        self.process = await asyncio.create_subprocess_exec(
            *WITH_CTRL_C, AGENTWORKS_BIN, *self.args,
            env={**base, "TERM": "xterm", **self.env}, cwd=self.cwd,
            stdin=slave, stdout=slave, stderr=slave,
        )  # fmt: skip
        os.close(slave)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        os.close(self.master)

    async def _read(self) -> bool:
        try:
            data = await asyncio.to_thread(os.read, self.master, 65536)
        except OSError:  # EIO: every holder of the terminal's other end has gone
            return False
        self.output += data.decode(errors="replace").replace("\r\n", "\n")
        return bool(data)

    async def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Read until the output (colour codes left out) matches `pattern`."""
        async with asyncio.timeout(timeout):
            while not (found := re.search(pattern, ANSI.sub("", self.output))):
                assert await self._read(), f"ended before {pattern!r}: {self.output!r}"
        return found

    async def finish(self, timeout: float = 30) -> tuple[int, str]:
        """The exit code and everything it wrote (colour codes kept)."""
        async with asyncio.timeout(timeout):
            while await self._read():
                pass
            return await self.process.wait(), self.output


def _env(gateway, token: str, **more: str) -> dict[str, str]:
    return {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": token, **more}


async def test_tables_fit_the_terminal_and_colour_shows_only_on_a_terminal_without_no_color_G3(
    gateway, cli, operator_token, tmp_path
):
    """G3: at a terminal 100 columns wide `tokens list` fits in 100 columns (a long label
    cut with …, the id and the times whole) with a bold header; NO_COLOR or --no-color
    leave colour out; a refusal's `agentworks:` is red there. Into a pipe nothing is cut
    or coloured; COLUMNS sets the width there too."""
    env = _env(gateway, operator_token)
    label = "a label longer than the hundred columns of this terminal, " * 2
    code, out, err = await cli(
        "--json", "tokens", "create", "--principal", "user:dana", "--label", label, env=env
    )
    assert code == 0, err
    token_id = json.loads(out)["token_id"]

    async with Terminal("tokens", "list", env=env, cwd=tmp_path, columns=100) as term:
        code, shown = await term.finish()
    assert code == 0, shown
    lines = ANSI.sub("", shown).splitlines()
    assert lines[0].split()[:2] == ["ID", "PRINCIPAL"]
    assert all(len(line) <= 100 for line in lines), lines
    row = next(line for line in lines if token_id in line)
    assert "a label longer than" in row and "…" in row and label not in row
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d \S+  -$", row), row  # the times whole
    assert "\x1b[1mID" in shown  # the header is bold

    for colourless in ({"NO_COLOR": "1"}, {}):
        flags = () if colourless else ("--no-color",)
        async with Terminal(
            "tokens", "list", *flags, env={**env, **colourless}, cwd=tmp_path, columns=100
        ) as term:
            code, shown = await term.finish()
        assert code == 0 and "\x1b[" not in shown and "…" in shown, shown

    async with Terminal("targets", "get", "crew:nope", env=env, cwd=tmp_path) as term:
        code, shown = await term.finish()
    assert code == 4 and "\x1b[1;31magentworks:\x1b[0m crew:nope is not registered" in shown, shown

    code, out, err = await cli("tokens", "list", env=env)
    assert code == 0 and label in out and "\x1b[" not in out + err
    code, out, err = await cli("tokens", "list", env={**env, "COLUMNS": "100"})
    assert code == 0 and label not in out and all(len(x) <= 100 for x in out.splitlines())


async def test_times_show_in_the_local_zone_with_the_zone_named_G3(gateway, cli, operator_token):
    """G3: times print in the zone TZ names, with its name: a table to the minute
    (`2026-12-02 10:20 JST`), fields to the second; --json keeps the API's UTC times."""
    env = _env(gateway, operator_token)
    tokyo_env = {**env, "TZ": "Asia/Tokyo"}
    code, out, err = await cli(
        "tokens", "create", "--principal", "user:tz", "--label", "tz", env=tokyo_env
    )
    assert code == 0, err
    code, listed, err = await cli("--json", "tokens", "list", env=env)
    assert code == 0, err
    created = next(t for t in json.loads(listed)["tokens"] if t["label"] == "tz")["created_at"]
    assert created.endswith("+00:00")
    tokyo = datetime.fromisoformat(created).astimezone(ZoneInfo("Asia/Tokyo"))
    fields = dict(line.split(None, 1) for line in out.splitlines())
    assert fields["created_at"] == tokyo.strftime("%Y-%m-%d %H:%M:%S JST")

    for zone, name in (("America/New_York", None), ("UTC", "UTC"), ("Asia/Tokyo", "JST")):
        local = datetime.fromisoformat(created).astimezone(ZoneInfo(zone))
        code, out, err = await cli("tokens", "list", env={**env, "TZ": zone})
        assert code == 0, err
        row = next(line for line in out.splitlines() if " tz " in line)
        assert local.strftime("%Y-%m-%d %H:%M ") + (name or local.tzname() or "") in row, row


async def test_call_wait_at_a_terminal_shows_the_time_waited_and_ctrl_c_exits_130_G3_F7(
    gateway, alice_token, demo, echo, tmp_path
):
    """G3 F7: at a terminal `crews call --wait` keeps one line that counts the seconds
    and says no runtime has claimed the call yet; Ctrl-C exits 130 with one line saying
    the call goes on, no traceback. `messages read --wait` too exits 130 on Ctrl-C."""
    env = _env(gateway, alice_token)
    args = ("crews", "call", "demo", "echo", "-i", "text=hi", "--wait")
    async with Terminal(*args, env=env, cwd=tmp_path) as term:
        call_id = (await term.expect(r"call (\S+) accepted"))[1]
        await term.expect(r"\r… waiting for a runtime to claim it · [0-9]s", timeout=10)
        await term.expect(r"waiting for a runtime to claim it · [1-9]s")  # it counts
        assert "\r\x1b[K" in term.output  # one line, redrawn in place
        term.process.send_signal(signal.SIGINT)
        code, shown = await term.finish()
    assert code == 130, shown
    last = ANSI.sub("", shown).strip().splitlines()[-1]
    assert last.endswith(
        f"agentworks: stopped waiting; call {call_id} goes on: "
        f"agentworks crews call-status --call {call_id} "
        f"(end it: agentworks calls cancel {call_id})"
    ), shown
    assert "Traceback" not in shown

    code, out, _ = await _run(
        "--json", "messages", "send", "--crew", "demo", "anyone?", env=env, cwd=tmp_path
    )
    inbox = json.loads(out)["inbox_id"]
    async with Terminal("messages", "read", "--inbox", inbox, "--wait", "20", env=env,
                        cwd=tmp_path) as term:  # fmt: skip
        await term.expect("waiting up to 20 s for new messages")
        term.process.send_signal(signal.SIGINT)
        code, shown = await term.finish()
    assert code == 130 and "Traceback" not in shown, shown
    assert ANSI.sub("", shown).strip().splitlines()[-1].endswith("agentworks: interrupted")


async def _run(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}
    process = await asyncio.create_subprocess_exec(
        AGENTWORKS_BIN, *args, env={**base, **env}, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_version_and_did_you_mean_need_no_gateway_G3(cli):
    """G3: `--version` prints the package's version; a mistyped command, action or option
    exits 2 naming the closest one (with --json, in the error object)."""
    code, out, err = await cli("--version")
    assert (code, out) == (0, f"agentworks {metadata.version('agentworks-cli')}\n"), err

    code, _, err = await cli("mesages", "send", "--crew", "demo", "hi")
    assert code == 2 and "invalid choice: 'mesages'; did you mean 'messages'?" in err
    code, _, err = await cli("crews", "cal", "demo", "echo")
    assert code == 2 and "did you mean 'call'?" in err
    code, _, err = await cli("crews", "call", "demo", "echo", "--wiat")
    assert code == 2 and "unrecognized arguments: --wiat; did you mean '--wait'?" in err
    code, out, err = await cli("--json", "tokens", "lst")
    assert code == 2 and "did you mean 'list'?" in json.loads(out)["error"]["message"]
    code, _, err = await cli("zzzz")
    assert code == 2 and "did you mean" not in err  # nothing close: no guess


BASH_COMPLETE = """
source <("$1" completion bash)
shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
_agentworks
printf '%s\\n' "${COMPREPLY[@]}"
"""


def _bash(*words: str) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", BASH_COMPLETE, "bash", AGENTWORKS_BIN, "agentworks", *words],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.split()


def test_shell_completion_scripts_complete_commands_actions_and_options_G3():
    """G3: `agentworks completion bash` completes commands, actions, options and
    positional choices from the parser, past options and their values; zsh and fish get
    scripts of their own (run here when those shells are installed)."""
    assert _bash("agentworks", "mes") == ["messages"]
    assert _bash("agentworks", "crews", "ca") == ["call", "call-status", "call-file", "cancel"]
    assert _bash("agentworks", "--url", "http://x", "crews", "call", "demo", "e", "--w") == [
        "--wait"
    ]
    assert _bash("agentworks", "completion", "") == ["-h", "--help", "bash", "zsh", "fish"]
    assert _bash("agentworks", "crews", "call-status", "--call", "") == []  # a value: files
    assert "--product" in _bash("agentworks", "wake-ups", "list", "--product", "x", "--")

    zsh = subprocess.run(
        [AGENTWORKS_BIN, "completion", "zsh"], capture_output=True, text=True, check=True
    ).stdout
    assert zsh.startswith("#compdef agentworks\n") and "compdef _agentworks agentworks" in zsh
    fish = subprocess.run(
        [AGENTWORKS_BIN, "completion", "fish"], capture_output=True, text=True, check=True
    ).stdout
    assert "complete -c agentworks" in fish
    if shutil.which("zsh"):
        subprocess.run(["zsh", "-n", "-c", zsh], check=True, timeout=60)
    if shutil.which("fish"):
        done = subprocess.run(
            ["fish", "-c", f"{fish}\ncomplete -C 'agentworks crews ca'"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        assert [line.split("\t")[0] for line in done.stdout.splitlines()] == [
            "call", "call-file", "call-status", "cancel",
        ]  # fmt: skip


@pytest.fixture
def cli_json(tmp_path, gateway, operator_token) -> Path:
    """A cli.json as `agentworks up` writes it, with the gateway's loopback URL."""
    (tmp_path / ".agentworks").mkdir()
    path = tmp_path / ".agentworks" / "cli.json"
    path.write_text(json.dumps({"url": gateway.url, "token": operator_token}))
    return path


async def test_token_without_url_goes_to_the_url_in_cli_json_G3(cli, cli_json, alice_token, demo):
    """G3: `--token` without `--url` (or AGENTWORKS_URL) uses the URL `agentworks up`
    saved in cli.json, and the token given, not the file's."""
    code, out, err = await cli("--json", "messages", "send", "--crew", "demo", "hi",
                               "--token", alice_token)  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["accepted"] is True
    code, _, err = await cli("tokens", "list", "--token", alice_token)
    assert code == 3 and "only operators may list tokens" in err  # alice's token, not the file's
