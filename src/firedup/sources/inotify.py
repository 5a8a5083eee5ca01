"""Linux inotify through libc: one file descriptor that becomes readable when a
watched directory changes, so a follower sleeps in select() instead of polling."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
DIRECTORY_CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE

_libc = None


def _lib():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


class Inotify:
    """Watches directories; ``drain()`` returns the names that changed."""

    def __init__(self) -> None:
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def watch(self, directory: str, mask: int = DIRECTORY_CHANGES) -> int:
        wd = _lib().inotify_add_watch(self.fd, os.fsencode(directory), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory} failed")
        return wd

    def drain(self) -> set[str]:
        names: set[str] = set()
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return names
            offset = 0
            while offset + 16 <= len(buf):
                _, _, _, length = struct.unpack_from("iIII", buf, offset)
                name = buf[offset + 16:offset + 16 + length].rstrip(b"\0")
                names.add(os.fsdecode(name))
                offset += 16 + length

    def close(self) -> None:
        os.close(self.fd)


def available() -> bool:
    try:
        Inotify().close()
        return True
    except (OSError, AttributeError):
        return False
