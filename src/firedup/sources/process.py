"""Start a server in its own session with its output going straight to a log
file (not through a pipe into firedup: firedup exiting never blocks, kills or
loses output of the server) and watch it exit. Its process group is stopped
by ``pgroup``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

# The exit code of a process that is not our child: it ended, but its status went to its parent.
UNKNOWN_EXIT = -255


def start(argv: Sequence[str], log_path: str | os.PathLike, env: Mapping[str, str] | None = None,
          cwd: str | None = None) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=dict(env) if env is not None else None, cwd=cwd,
        )


class ExitWatch:
    """A file descriptor that becomes readable when a process ends (pidfd), and its exit code."""

    def __init__(self, pid: int, popen: subprocess.Popen | None = None):
        self.pid = pid
        self.popen = popen
        self.fd = os.pidfd_open(pid)

    def fileno(self) -> int:
        return self.fd

    def poll(self) -> int | None:
        """The exit code once the process has ended (-N for a signal), else None."""
        if self.popen is not None:
            return self.popen.poll()
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return UNKNOWN_EXIT
        except PermissionError:
            return None
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return UNKNOWN_EXIT
        except OSError:
            return UNKNOWN_EXIT
        return None

    def close(self) -> None:
        os.close(self.fd)


def pid_exists(pid: int) -> bool:
    if pid < 1:  # to kill(2), 0 and -N name process groups, not a process
        return False
    try:
        os.kill(pid, 0)
        return True
    except (ProcessLookupError, OverflowError):  # OverflowError: past any pid the kernel gives
        return False
    except PermissionError:
        return True
