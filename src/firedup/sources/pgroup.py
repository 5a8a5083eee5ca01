"""A server's process group: whether it still runs, and stopping it (SIGTERM,
then SIGKILL after a grace period). One loop for every stop firedup makes:
here (``firedup stop``, a failed start) and on a remote host, where the agent
runs this module too (standard library only)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

KILL_WAIT = 5.0  # how long to wait for the kernel to take SIGKILLed processes away


def _group_and_state(pid: int) -> tuple[int, str] | None:
    """(process group, state letter) from /proc/PID/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[2]), fields[0]
    except (OSError, ValueError, IndexError):
        return None


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies waiting for their
    parent to reap them do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in os.listdir("/proc"):
        found = _group_and_state(int(entry)) if entry.isdigit() else None
        if found is not None and found[0] == pgid and found[1] != "Z":
            return True
    return False


def stop_group(pgid: int, grace: float, reap: Callable[[], object] | None = None) -> str:
    """SIGTERM the process group, SIGKILL what is left after ``grace`` seconds
    (vLLM can ignore SIGTERM for more than 10 s). ``reap``: called while
    waiting, to collect a child's exit status (``Popen.poll``) so that it does
    not linger as a zombie. Returns how it ended: gone (nothing ran, or only
    zombies were left), terminated or killed."""
    if not group_alive(pgid):
        return "gone"
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        if not group_alive(pgid):
            return "terminated"
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return "terminated"
    deadline = time.monotonic() + KILL_WAIT
    while group_alive(pgid) and time.monotonic() < deadline:
        if reap is not None:
            reap()
        time.sleep(0.02)
    return "killed"
