"""Who holds a file or a port, from /proc: the processes writing a log, and the
process listening on a TCP port.

A log watched without ``--pid`` gets its writer from here (its exit and
activity then count as they would with ``--pid``); a health answer counts as
the server's only when the listening socket belongs to the server's process
tree; ``launch`` refuses a port someone already listens on.

Only what this user may read is seen: another user's processes, another
network namespace (a container) or another host are not, and callers say so.

Standard library only: the remote agent imports this module too, under the
host's own python3 (see ``ssh.AGENT_MODULES``).
"""

import ipaddress
import os
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

_LISTEN = "0A"  # TCP state in /proc/net/tcp
_WRITE_MODES = os.O_WRONLY | os.O_RDWR


@dataclass(frozen=True)
class Holder:
    inode: str  # the listening socket
    pid: int | None  # None: its process is not visible to this user
    command: str | None

    def describe(self) -> str:
        if self.pid is None:
            return "a process this user cannot see"
        return f"pid {self.pid} ({self.command})" if self.command else f"pid {self.pid}"


def command_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return None
    text = " ".join(a.decode("utf-8", "replace") for a in argv)
    return text if len(text) <= 200 else text[:197] + "..."


def _pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _fds(pid: int) -> list[tuple[str, str]]:
    """(fd, link target) of a process's open files, [] where not readable."""
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError:
        return []
    out = []
    for fd in names:
        try:
            out.append((fd, os.readlink(f"{base}/{fd}")))
        except OSError:
            continue
    return out


def _writes(pid: int, fd: str) -> bool:
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("flags:"):
                    return bool(int(line.split()[1], 8) & _WRITE_MODES)
    except (OSError, ValueError, IndexError):
        pass
    return False


def writers(path: str, exclude: AbstractSet[int] = frozenset()) -> list[int]:
    """The processes that have ``path`` open for writing, outermost first: the
    one whose parent is not itself a writer (a server and the workers that
    inherited its stdout), then the others. ``exclude``: processes not to
    count (the watcher and what started it: a harness writing the log itself)."""
    try:
        target = os.path.realpath(path)
    except OSError:
        return []
    found = [pid for pid in _pids() if pid not in exclude
             and any(link == target and _writes(pid, fd) for fd, link in _fds(pid))]
    return sorted(found, key=lambda pid: (_parent(pid) in found, _started(pid)))


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _parent(pid: int | None) -> int | None:
    stat = _stat(pid) if pid is not None else None
    return stat[0] if stat else None


def _started(pid: int | None) -> int:
    stat = _stat(pid) if pid is not None else None
    return stat[1] if stat else 0


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A /proc/net/tcp{,6} address: 32-bit words in host order (little-endian here)."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    return ip.ipv4_mapped or ip if ip.version == 6 else ip


def _reaches(listening: ipaddress.IPv4Address | ipaddress.IPv6Address, address: str | None) -> bool:
    """Whether a socket listening on ``listening`` takes connections to, or
    blocks a bind on, ``address`` (None: any address)."""
    if address is None or listening.is_unspecified:
        return True
    target = ipaddress.ip_address(address)
    return target.is_unspecified or listening == target


def listening_inodes(port: int, address: str | None = None, seen_by: int | None = None) -> set[str]:
    """The inodes of the sockets listening on TCP ``port`` (on ``address`` or a
    wildcard, when given): cheap, two /proc tables; those of process ``seen_by``'s
    network namespace when given (a server in a container)."""
    inodes = set()
    where = f"/proc/{seen_by}/net" if seen_by else "/proc/net"
    for table in (f"{where}/tcp", f"{where}/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for row in f:
                    cols = row.split()
                    if len(cols) <= 9 or cols[3] != _LISTEN:
                        continue
                    host, _, hex_port = cols[1].rpartition(":")
                    if int(hex_port, 16) == port and _reaches(_address(host), address):
                        inodes.add(cols[9])
        except OSError:
            continue
    return inodes


def listeners(port: int, address: str | None = None) -> list[Holder]:
    """Who listens on TCP ``port`` (on ``address`` or a wildcard) in this
    network namespace ([] if nobody), outermost process first (workers
    inherit the socket)."""
    inodes = listening_inodes(port, address)
    if not inodes:
        return []
    sockets = {f"socket:[{inode}]": inode for inode in inodes}
    holders: list[Holder] = []
    for pid in _pids():
        for _, link in _fds(pid):
            if link in sockets:
                holders.append(Holder(sockets[link], pid, command_of(pid)))
                break
    pids = {h.pid for h in holders}
    holders.sort(key=lambda h: (_parent(h.pid) in pids, _started(h.pid)))
    seen = {h.inode for h in holders}
    holders += [Holder(inode, None, None) for inode in sorted(inodes - seen)]
    return holders


def tree(pid: int) -> set[int]:
    """``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for p in _pids():
        parent = _parent(p)
        if parent is not None:
            children.setdefault(parent, []).append(p)
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        todo.extend(children.get(p, ()))
    return out


def lineage(pid: int) -> set[int]:
    """``pid`` and its ancestors."""
    out: set[int] = set()
    current: int | None = pid
    while current and current not in out:
        out.add(current)
        current = _parent(current)
    return out


def _fd_target(pid: int, fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None


def input_pipe(pid: int) -> str | None:
    """The pipe a process reads its standard input from ("pipe:[123]"), None when it is no pipe."""
    target = _fd_target(pid, 0)
    return target if target and target.startswith("pipe:") else None


def ownership(port: int, pid: int | None, before: set[str] | None = None,
              address: str | None = None, pipe: str | None = None) -> tuple[str, list[Holder]]:
    """Whose is the server answering on ``port``, for the process tree of ``pid``:

    - ``tree``: a listening socket belongs to the tree, or to a process whose
      output goes into ``pipe`` (the log's writer's input: ``server | tee log``);
    - ``foreign``: the sockets belong to processes outside it, and were there
      before it started (``before``: their inodes; None when the start is not
      known, as for ``watch --pid``: then any socket outside the tree);
    - ``unknown``: no socket is visible here (another host, network namespace or
      container), or one outside the tree appeared after the start (a
      container runtime's proxy), which cannot be told from the server's own;
    - ``unchecked``: sockets are visible, but no process is known to check them
      against (a log watched alone, its writer not found).
    """
    holders = listeners(port, address)
    if not holders:
        return "unknown", holders
    if pid is None:
        return "unchecked", holders
    ours = tree(pid)
    if any(h.pid in ours or (pipe and h.pid is not None and pipe in (_fd_target(h.pid, 1), _fd_target(h.pid, 2)))
           for h in holders):
        return "tree", holders
    if before is None or any(h.inode in before for h in holders):
        return "foreign", holders
    return "unknown", holders
