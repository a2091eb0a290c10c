"""What a sandbox shows, as bubblewrap's mount arguments (T6): the system's read-only
part, the mounts in order with the folders above each made 0755, and which of the
suite's own paths lie inside something shown, to be hidden (`sandbox.Sandbox.argv`)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Sequence

from agentworks.runtime.folders import HOME_FOLDER, RUNNER_FOLDERS

# The system's read-only part: bound as they are, or made the same symlinks.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "services",
    "protocols",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "pki",
    "alternatives",
    "mime.types",
    "os-release",
)


def hidden_paths(root: pathlib.Path, read_only: Sequence[str], secrets: Sequence[str]) -> list[str]:
    """What of the suite's is inside something the sandbox sees: its home
    (`AGENTWORKS_HOME`, the default `.agentworks` here; the root's own `.agentworks` is
    always hidden, `RUNNER_FOLDERS`) and the `secrets` (files or folders). Each by where
    it really is (links resolved: a mount through a link would follow it)."""
    home = os.environ.get("AGENTWORKS_HOME") or HOME_FOLDER
    candidates = [pathlib.Path(home), *(pathlib.Path(path) for path in secrets)]
    seen = [root, *(pathlib.Path(os.path.realpath(p)) for p in read_only)]
    always = {root / name for name in RUNNER_FOLDERS}
    found: list[str] = []
    for candidate in candidates:
        path = pathlib.Path(os.path.realpath(candidate))
        if path in always or str(path) in found or not path.exists():
            continue
        if any(path == s or s in path.parents for s in seen):
            found.append(str(path))
    return found


@dataclasses.dataclass
class MountView:
    """bubblewrap's mount arguments, in order, with the folders above each mount made
    0755 (bubblewrap would copy the host's modes, 0700 for /root)."""

    args: list[str] = dataclasses.field(default_factory=list)
    # Host folders bound: what is under them exists already. (A tmpfs is empty.)
    mounted: list[str] = dataclasses.field(default_factory=list)
    made: set[str] = dataclasses.field(default_factory=set)

    def add(self, *args: str) -> None:
        self.args.extend(args)

    def covers(self, path: str) -> bool:
        return any(path == m or path.startswith(m.rstrip("/") + "/") for m in self.mounted)

    def _parents(self, path: str) -> None:
        parents = list(pathlib.PurePosixPath(path).parents)[::-1][1:]  # without "/"
        for parent in map(str, parents):
            if parent not in self.made and not self.covers(parent):
                self.args += ["--perms", "0755", "--dir", parent]
                self.made.add(parent)

    def system(self) -> None:
        for path in SYSTEM:
            if os.path.islink(path):
                self.args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                self.args += ["--ro-bind", path, path]
                self.mounted.append(path)
        self._parents("/etc/x")
        for name in ETC_FILES:
            self.args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]

    def ro_bind(self, source: str, dest: str | None = None, *, try_: bool = False) -> None:
        dest = dest or source
        self._parents(dest)
        self.args += ["--ro-bind-try" if try_ else "--ro-bind", source, dest]
        self.mounted.append(dest)

    def bind(self, path: str, dest: str | None = None) -> None:
        dest = dest or path
        self._parents(dest)
        self.args += ["--bind", path, dest]
        self.mounted.append(dest)

    def tmpfs(self, path: str, size: int, mode: int) -> None:
        self._parents(path)
        self.args += ["--perms", f"{mode:04o}", "--size", str(size), "--tmpfs", path]
