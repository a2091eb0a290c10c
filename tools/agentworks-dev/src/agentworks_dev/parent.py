"""Children of `agentworks up` end with it, however it ends (issue 26).

Each child is started with Linux's parent-death signal: when the supervisor dies, even
by SIGKILL, the kernel sends the child SIGTERM, and the child drains and exits as on any
SIGTERM (P4), freeing its ports, so the next `make run` starts. (Without it, killed
supervisors left services half-broken, holding their ports.) The home's lock is an
flock, which the kernel drops with the process: no stale lock is left either.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1

# Loaded before any fork: the child only calls into it (no dlopen after fork).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent(parent: int) -> None:
    """For `preexec_fn`: in the child, SIGTERM when `parent` dies; if it died already
    (between fork and here), end at once."""
    if _LIBC is None:
        return
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)
