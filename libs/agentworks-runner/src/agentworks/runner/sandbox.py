"""Every execution of the command runner in a sandbox of its own (T6).

The runner starts each command under bubblewrap (Debian's `bubblewrap` package):

- **Namespaces**: its own PID namespace (it sees only its own processes; when its first
  process ends, the kernel kills every other one in it, `setsid` and double forks
  included), IPC, UTS and mount namespaces, and with `network: none` a network
  namespace with only loopback. `--die-with-parent`: the sandbox dies with its runner.
- **User**: a runner running as root starts bubblewrap as root, which makes the
  namespaces and mounts, then drops to the sandbox user (`uid`, default 65534, with no
  groups, no capabilities and no-new-privs: `setpriv`) inside a user namespace of the
  execution's own (`unshare --user`, so RLIMIT_NPROC counts only its processes). On
  the host its processes and files belong to that uid, never to root. A runner that is
  not root gets bubblewrap's own user namespace (`--unshare-user --disable-userns`):
  the sandbox then runs as the runner's uid (which owns its files on the host), with
  no view of the runner beyond what is mounted.
- **Files**: a new root with only: `/usr`, `/bin`, `/sbin`, `/lib*` read-only (the system),
  a few files of `/etc` read-only (`sandbox_view.ETC_FILES`: users and groups, name resolution, TLS
  certificates, time zone, the linker cache; no keys, no shadow), a new `/proc` (its own
  processes only) and `/dev` (null, zero, random, tty...), a private `/tmp` and
  `/dev/shm` (tmpfs, at most the memory limit), the runner's Python installation
  read-only (to run the sandbox's init, `_sandbox_init.py`, and the agent's MCP
  bridge, `agent_mcp/bridge.py`, at `/run/agentworks/`; the item's MCP socket, which
  lives in a folder of the runner's own, at `/run/agentworks/mcp.sock`), the target's
  `read_only` paths, the project root read-write (shared between calls), over it an
  empty `.calls` with only the call's own `.calls/<call_id>/` (read-write; for a
  turn's command, its `.turns/<turn_id>/` in an empty `.turns`), an empty
  `.agentworks` (over the root's, the suite's default home), the suite's home
  (`AGENTWORKS_HOME`) hidden by an empty tmpfs, and the files the runner's secret
  variables name (its signing key, runtime credential, TLS key: `hidden`) by
  `/dev/null` (which cannot be opened there: no devices on a bind mount), where they
  lie inside what it sees.
  Nothing else of the host exists in it: not the runner's home, not other calls' or
  turns' folders, not other items' MCP sockets, not the PostgreSQL socket directory,
  not the runner's records.
- **What is left behind** (B4): `.calls`, `.turns` and `.agentworks` in the project root
  are the runner's (`own_folders`): real folders, made before the first sandbox when
  missing, and mount points in every sandbox, so no command can put a link, a file or
  a FIFO there for a later sandbox to trip on (bubblewrap mounts through a link, or
  fails on a dangling one). One found there anyway (a runner without a sandbox) is
  removed without being followed before the next sandbox, and logged.
- **Environment**: what `CommandRunner.environment` gives (the runner's, without its
  secrets, the configured `env` and the call's variables), with `HOME` and `TMPDIR` set
  to the private `/tmp`.

`Sandbox.check()` tries all of it once (a command that runs `true`): when bubblewrap is
missing or cannot make the namespaces (user namespaces off, no privilege to mount), the
runner refuses to start (`SandboxUnavailable`) unless told to run without a sandbox
(`--sandbox none`, `AGENTWORKS_RUNTIME_SANDBOX=none`), which `WITHOUT_SANDBOX` says
what it gives up.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from agentworks.agents.agent_mcp import bridge
from agentworks.runner import _sandbox_init
from agentworks.runner.cgroups import Cgroups
from agentworks.runner.limits import MIB, Policy
from agentworks.runner.sandbox_view import MountView, hidden_paths
from agentworks.runtime.folders import RUNNER_FOLDERS, own_folders

INIT_PATH = "/run/agentworks/init.py"
DEFAULT_UID = 65534  # "nobody": owns nothing on a usual system

log = structlog.get_logger("agentworks.runner.sandbox")

WITHOUT_SANDBOX = (
    "commands run WITHOUT a sandbox: as the runner's own user, seeing everything it sees "
    "(the suite's home and keys, other calls' folders, the database's socket, other "
    "processes and their environments); processes they move out of their process group "
    "(setsid, double fork) outlive the call; memory, process and open-file limits are "
    "not kept by the kernel, only checked by the runner on the processes it can see"
)


class SandboxUnavailable(Exception):
    """No sandbox can be made here; the message says why and what to do."""


@dataclass
class Launch:
    """What one sandboxed command is started with."""

    argv: list[str]
    env: dict[str, str]
    status_fd: int  # the write end, passed to the sandbox
    status_read: int  # the runner's end
    cgroups: Cgroups | None
    file_owner: int


@dataclass(frozen=True)
class Sandbox:
    """The bubblewrap sandbox every command runs in; `check()` it before use."""

    bwrap: str = "bwrap"
    uid: int = DEFAULT_UID  # the sandbox user, when the runner is root
    gid: int = DEFAULT_UID
    cgroups: bool = True  # memory and pids cgroups per execution, where they can be made

    @property
    def privileged(self) -> bool:
        """A root runner: bubblewrap runs as root and drops to `uid`."""
        return os.geteuid() == 0

    @property
    def user(self) -> int:
        """The host uid the sandbox's processes and files have."""
        return self.uid if self.privileged else os.geteuid()

    def _tool(self, name: str, package: str) -> str:
        found = shutil.which(name)
        if found is None:
            raise SandboxUnavailable(
                f"{name} was not found ({package} is needed for the sandbox): install "
                f"the {package} package (apt-get install {package}), or run without a "
                "sandbox with --sandbox none (AGENTWORKS_RUNTIME_SANDBOX=none), which gives "
                f"up what it keeps: {WITHOUT_SANDBOX}"
            )
        return found

    def tools(self) -> dict[str, str]:
        """The programs used: bwrap, and as root setpriv and unshare (util-linux)."""
        found = {"bwrap": self._tool(self.bwrap, "bubblewrap")}
        if self.privileged:
            found["setpriv"] = self._tool("setpriv", "util-linux")
            found["unshare"] = self._tool("unshare", "util-linux")
        return found

    def check(self) -> str:
        """Make one sandbox that runs `true`; a description of the sandbox, or
        SandboxUnavailable saying why there is none."""
        tools = self.tools()
        with tempfile.TemporaryDirectory(prefix="agentworks-sandbox-check-") as folder:
            root = pathlib.Path(folder)
            own_folders(root)
            output = root / ".calls" / "check"
            output.mkdir()
            if self.privileged:
                os.chown(output, self.uid, self.gid)
            read, write = os.pipe()
            try:
                argv = self.argv(
                    ["true"], root=root, output_dir=output, policy=Policy(), status_fd=write
                )
                try:
                    done = subprocess.run(
                        argv,
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        pass_fds=(write,),
                        timeout=30,
                        env=self.environment({"PATH": os.environ.get("PATH", "/usr/bin:/bin")}),
                    )
                except (OSError, subprocess.TimeoutExpired) as exc:
                    raise SandboxUnavailable(f"bubblewrap could not be run: {exc}") from None
                os.close(write)
                write = -1
                status = os.read(read, 65536)
            finally:
                os.close(read)
                if write >= 0:
                    os.close(write)
        if done.returncode != 0 or b'"returncode": 0' not in status:
            error = done.stderr.decode(errors="replace").strip()[-2000:]
            raise SandboxUnavailable(
                f"bubblewrap ({tools['bwrap']}) could not make a sandbox here (exit "
                f"{done.returncode}: {error or 'no message'}). It needs user namespaces "
                "(sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 "
                "where that exists) and, as root, the right to make mount namespaces. "
                "Or run without a sandbox with --sandbox none (AGENTWORKS_RUNTIME_SANDBOX"
                f"=none), which gives up what it keeps: {WITHOUT_SANDBOX}"
            )
        how = (
            f"bubblewrap as root, commands as uid {self.uid} in user namespaces of their own"
            if self.privileged
            else f"bubblewrap in a user namespace, commands as this uid ({os.geteuid()})"
        )
        return how

    @staticmethod
    def environment(env: dict[str, str]) -> dict[str, str]:
        """The command's environment inside: `env` with HOME and TMPDIR on its /tmp."""
        return {**env, "HOME": "/tmp", "TMPDIR": "/tmp"}

    def prepare(
        self,
        argv: Sequence[str],
        *,
        root: pathlib.Path,
        output_dir: pathlib.Path,
        policy: Policy,
        env: dict[str, str],
        name: str,
        hidden: Sequence[str] = (),
        binds: Sequence[tuple[str, str]] = (),
    ) -> Launch:
        """Everything one execution is started with: its folder owned by the sandbox
        user (0700), its cgroups when they can be made, the status pipe, the argv.
        `binds`: host files shown read-write at a path of their own (`(host, inside)`:
        the item's MCP socket, at `/run/agentworks/mcp.sock`)."""
        replaced = own_folders(root)
        if replaced:
            log.warning("sandbox.leftovers_replaced", root=str(root), replaced=replaced)
        output_dir.chmod(0o700)
        if self.privileged:
            os.chown(output_dir, self.uid, self.gid)
        cgroups = None
        if self.cgroups:
            # Tasks: the command's, bubblewrap (two) and the sandbox's init.
            limits = policy.limits
            cgroups = Cgroups.make(
                name, memory_bytes=limits.memory_bytes, tasks=limits.processes + 3
            )
        read, write = os.pipe()
        os.set_inheritable(write, True)
        full = self.argv(
            argv,
            root=root,
            output_dir=output_dir,
            policy=policy,
            status_fd=write,
            cgroups=cgroups,
            hidden=hidden,
            binds=binds,
        )
        return Launch(full, self.environment(env), write, read, cgroups, self.user)

    def argv(
        self,
        argv: Sequence[str],
        *,
        root: pathlib.Path,
        output_dir: pathlib.Path,
        policy: Policy,
        status_fd: int,
        cgroups: Cgroups | None = None,
        hidden: Sequence[str] = (),
        binds: Sequence[tuple[str, str]] = (),
    ) -> list[str]:
        """The full command line: [a cgroups joiner], bwrap, [setpriv, unshare], init."""
        tools = self.tools()
        limits = policy.limits
        rlimits = {
            "RLIMIT_NPROC": limits.processes + 2,  # + the init and this execution's init.py
            "RLIMIT_NOFILE": limits.open_files,
            "RLIMIT_CPU": max(1, int(limits.cpu_seconds + 0.999)),
            "RLIMIT_FSIZE": limits.output_bytes + 1,
            "RLIMIT_CORE": 0,
        }
        if cgroups is None or not cgroups.memory:
            rlimits["RLIMIT_AS"] = limits.memory_bytes
        python = os.path.realpath(sys.executable)
        view = MountView()
        view.system()
        view.add("--proc", "/proc", "--dev", "/dev")
        view.tmpfs("/tmp", limits.memory_bytes, 0o1777)
        view.tmpfs("/dev/shm", min(limits.memory_bytes, 64 * MIB), 0o1777)
        view.ro_bind(_sandbox_init.__file__, INIT_PATH)
        view.ro_bind(bridge.__file__, bridge.SANDBOX_PATH)  # the agent's MCP bridge (L2)
        prefix = os.path.realpath(sys.base_prefix)
        shown = list(policy.read_only)
        if not view.covers(python):
            shown.append(prefix if python.startswith(prefix + "/") else os.path.dirname(python))
            view.ro_bind(shown[-1])
        for path in policy.read_only:
            view.ro_bind(path, try_=True)
        view.bind(str(root))
        # Every call's and turn's folder and the suite's home hidden, always (B4): a
        # mount point cannot be made, replaced or removed by the command.
        for name in RUNNER_FOLDERS:
            view.tmpfs(str(root / name), 1 * MIB, 0o755)
        for path in hidden_paths(root, shown, hidden):
            if os.path.isdir(path):
                view.tmpfs(path, 1 * MIB, 0o755)
            else:
                view.args += ["--ro-bind", "/dev/null", path]
        view.bind(str(output_dir))
        for source, inside in binds:
            view.bind(source, inside)
        namespaces = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if policy.network == "none":
            namespaces.append("--unshare-net")
        command = [python, "-I", "-S", INIT_PATH, str(status_fd), json.dumps(rlimits), "--"]
        command += list(argv)
        full = [tools["bwrap"], "--die-with-parent", *namespaces]
        if self.privileged:
            full += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            full += [*view.args, "--chdir", str(output_dir), "--"]
            full += [
                tools["setpriv"],
                f"--reuid={self.uid}",
                f"--regid={self.gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
                tools["unshare"],
                "--user",
                f"--map-user={self.uid}",
                f"--map-group={self.gid}",
                "--",
            ]
        else:
            full += ["--unshare-user", "--disable-userns"]
            full += [*view.args, "--chdir", str(output_dir), "--"]
        full += command
        if cgroups is not None:
            # Join the cgroups first, then become bubblewrap: nothing starts outside them.
            joiner = (
                'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
            )
            files = [str(f) for f in cgroups.procs_files]
            full = ["/bin/sh", "-c", joiner, "sh", *files, "--", *full]
        return full
