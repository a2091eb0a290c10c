"""The names of the project root the runner owns (B4): `.calls`, `.turns`, `.agentworks`.

Every sandbox mounts over each (`sandbox.py`), so no command can make, replace or remove
them; `own_folders` makes them real folders before a sandbox (or a call's or turn's
folder) is made, removing without following whatever else is there.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
from collections.abc import Sequence

from agentworks.runtime.uploads import file_kind

# Under the project root, the folders of calls (`.calls/<call_id>/`) and of turns
# (`.turns/<turn_id>/`): each sandbox sees its own folder there and nothing else.
PRIVATE_FOLDERS = (".calls", ".turns")
# The names of the project root the runner owns (B4): the private folders and the
# suite's home. Each is a real folder (made by the runner when missing) and every
# sandbox mounts over each, so no command can make, replace or remove them.
HOME_FOLDER = ".agentworks"
RUNNER_FOLDERS = (*PRIVATE_FOLDERS, HOME_FOLDER)


def own_folders(root: pathlib.Path, names: Sequence[str] = RUNNER_FOLDERS) -> list[str]:
    """Make each `root/<name>` a real folder before a sandbox mounts over it (B4); what
    was replaced, each as `name (what it was)`.

    A missing one is made (0700, the runner's). Anything else there (a symbolic link, a
    file, a FIFO, a socket: left by a runner without a sandbox, or by a command before
    every sandbox mounted over these names) is removed without being followed (unlink
    never follows a link: what it points to is left alone) and replaced by an empty
    folder. A real folder is kept; `.calls` and `.turns` not owned by a root runner
    (made by a sandbox's user) are given back to it, through a descriptor opened
    without following links."""
    root.mkdir(parents=True, exist_ok=True)
    replaced = []
    for name in names:
        path = root / name
        for _ in range(5):  # a runner without a sandbox may race with us: try again
            try:
                found = os.lstat(path)
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, 0o700)
                continue
            if stat.S_ISDIR(found.st_mode):
                if name in PRIVATE_FOLDERS and os.geteuid() == 0 and found.st_uid != 0:
                    _take_back(path)
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            replaced.append(f"{name} ({file_kind(found.st_mode)})")
        else:
            raise OSError(f"{path} keeps changing: it cannot be made a folder of the runner's")
    return replaced


def _take_back(path: pathlib.Path) -> None:
    """A folder made by someone else, owned by root (0700), never through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchown(fd, 0, 0)
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


__all__ = ["HOME_FOLDER", "PRIVATE_FOLDERS", "RUNNER_FOLDERS", "own_folders"]
