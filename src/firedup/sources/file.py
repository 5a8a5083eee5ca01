"""Follow a log file like ``tail -F``: wait for it to appear, follow rotation
and truncation, never read a byte twice."""

from __future__ import annotations

import os
from typing import BinaryIO


def keep_previous(path: str | os.PathLike) -> str | None:
    """Make way for a fresh log at ``path``: a previous one that is not empty
    becomes NAME.1.log (replacing an older NAME.1.log), so that a new start
    never reads as the one before. Returns where it went (None: nothing to keep).
    Standard library only: the remote agent does the same for a remote launch."""
    path = os.fspath(path)
    try:
        if os.path.getsize(path) == 0:
            return None
    except OSError:  # no log yet
        return None
    stem, ext = os.path.splitext(path)
    previous = f"{stem}.1{ext}"
    os.replace(path, previous)
    return previous


class FileFollower:
    CHUNK = 4 << 20

    def __init__(self, path: str | os.PathLike, offset: int = 0):
        """Follow ``path`` from byte ``offset`` of the file it names now (0: the whole file)."""
        self.path = os.fspath(path)
        self.start_offset = offset
        self._f: BinaryIO | None = None
        self._ino: tuple[int, int] | None = None
        self.offset = 0
        self.rotations = 0

    @property
    def directory(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    @property
    def exists(self) -> bool:
        return self._f is not None

    def _open(self) -> bool:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return False
        st = os.fstat(f.fileno())
        self._f, self._ino = f, (st.st_dev, st.st_ino)
        if self.rotations == 0 and self.start_offset:
            f.seek(min(self.start_offset, st.st_size))
        self.offset = f.tell()
        return True

    def read(self, limit: int = CHUNK) -> bytes:
        """What was appended since the last call, at most ``limit`` bytes: call
        again until it returns nothing (a huge file, a hole of gigabytes, is read
        a chunk at a time, never held whole). The old file is read to its end
        before a rotation or truncation is looked for."""
        if self._f is None and not self._open():
            return b""
        data = self._take(limit)
        if data:
            return data
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return b""  # moved away: keep reading the old file until it reappears
        assert self._f is not None
        if (st.st_dev, st.st_ino) != self._ino:
            self._f.close()
            self._f = None
            self.rotations += 1
            return self._take(limit) if self._open() else b""
        if st.st_size < self.offset:  # truncated in place: start over at its new end of data
            self._f.seek(0)
            self.offset = 0
            return self._take(limit)
        return b""

    def _take(self, limit: int) -> bytes:
        assert self._f is not None
        data = self._f.read(limit)
        self.offset += len(data)
        return data

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
