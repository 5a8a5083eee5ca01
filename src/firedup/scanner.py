"""Bytes → the lines worth a closer look, at the speed of the regex engine.

Every rule pattern is compiled into one Hyperscan database (in prefilter
mode: a superset of the Python pattern), which finds in one pass over a chunk
the few lines any rule could match; only those are decoded and handed to
Python. A line is a segment ended by ``\\n`` or ``\\r``, so a tqdm bar that
redraws with ``\\r`` yields each state; line numbers count ``\\n`` only, as an
editor does. When the engine asks for it (``dense``: inside a traceback), every
line is handed over. Memory stays constant: a chunk is dropped once scanned,
and a line longer than ``MAX_LINE`` is cut into pieces.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from .lines import ANSI

try:
    import hyperscan
except ImportError:  # platforms without a hyperscan wheel: same results, slower
    hyperscan = None

MAX_LINE = 1 << 20
_ANSI = re.compile(ANSI.pattern.encode())


_START_ANCHOR = re.compile(r"(^|\||\((?:\?:|\?P<\w+>)?)\^")
_END_ANCHOR = re.compile(r"(?<!\\)\$(?=\||\)|$)")


def _prefilter_pattern(pattern: str) -> bytes:
    # Python patterns are matched against a message with its prefixes removed
    # (and its line end, \r or \n, cut); in the raw stream the message starts
    # anywhere in the line, so the anchors go.
    return _END_ANCHOR.sub("", _START_ANCHOR.sub(r"\1", pattern)).encode()


class Prefilter:
    """Which patterns match where in a buffer: a sorted list of (end offset, pattern id)."""

    def __init__(self, patterns: Sequence[str]):
        self.patterns = [_prefilter_pattern(p) for p in patterns]
        if hyperscan is not None:
            self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            flag = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY
            self._db.compile(
                expressions=self.patterns,
                ids=list(range(len(self.patterns))),
                elements=len(self.patterns),
                flags=[flag] * len(self.patterns),
            )
            self._scratch = hyperscan.Scratch(self._db)
        else:
            self._compiled = [re.compile(p, re.MULTILINE) for p in self.patterns]

    def scan(self, buf: bytes) -> list[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        if hyperscan is not None:
            def on_match(pid: int, start: int, end: int, flags: int, context: object) -> None:
                hits.append((end, pid))

            self._db.scan(buf, match_event_handler=on_match, scratch=self._scratch)
        else:
            for pid, rx in enumerate(self._compiled):
                # re reports one greedy match, whose end may lie past a line
                # end (a trailing \s*): report the first byte of the line it is on.
                for m in rx.finditer(buf):
                    at = m.start()
                    while at < m.end() - 1 and buf[at] in b"\r\n":
                        at += 1
                    hits.append((at + 1, pid))
        hits.sort()
        return hits


def _end_of_segment(buf: bytes, start: int) -> int:
    nl = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, nl if nl >= 0 else len(buf))
    if cr >= 0:
        return cr
    return nl if nl >= 0 else len(buf)


class Scanner:
    """Feed bytes, get ``(lineno, segment, pattern ids)`` for the lines that matter."""

    def __init__(self, prefilter: Prefilter):
        self.prefilter = prefilter
        self.dense = False
        self.lineno = 1  # line number where the carried-over tail starts
        self.lines = 0  # complete lines seen
        self.last: tuple[int, bytes] | None = None  # last non-blank segment
        self._tail = b""

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes, list[int]]]:
        buf = self._tail + data if self._tail else data
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        if cut == 0 and len(buf) > MAX_LINE:
            cut = len(buf)
        self._tail = buf[cut:]
        if cut:
            yield from self._region(buf[:cut] if cut < len(buf) else buf)

    def close(self) -> Iterator[tuple[int, bytes, list[int]]]:
        tail, self._tail = self._tail, b""
        if tail:
            yield from self._region(tail)

    def _region(self, region: bytes) -> Iterator[tuple[int, bytes, list[int]]]:
        if b"\x1b" in region:  # colour codes can sit inside the words rules look for
            region = _ANSI.sub(b"", region)
        hits = self.prefilter.scan(region)
        n = len(region)
        nh = len(hits)
        lineno, counted = self.lineno, 0
        pos = i = 0
        while pos < n:
            if self.dense:
                start = pos
                end = _end_of_segment(region, pos)
            else:
                while i < nh and hits[i][0] - 1 < pos:
                    i += 1
                if i == nh:
                    break
                anchor = hits[i][0] - 1
                if region[anchor] in b"\r\n":  # a match that ran over a line end
                    i += 1
                    continue
                start = max(region.rfind(b"\n", pos, anchor), region.rfind(b"\r", pos, anchor), pos - 1) + 1
                end = _end_of_segment(region, anchor)
            ids = []
            while i < nh and hits[i][0] - 1 < end:
                if hits[i][0] - 1 >= start:
                    ids.append(hits[i][1])
                i += 1
            segment = region[start:end]
            pos = end + 1
            if segment.strip():
                lineno += region.count(b"\n", counted, start)
                counted = start
                yield lineno, segment, ids
        end_lineno = lineno + region.count(b"\n", counted)
        tail = region.rstrip()
        if tail:
            start = max(tail.rfind(b"\n"), tail.rfind(b"\r")) + 1
            self.last = (end_lineno - region.count(b"\n", start), tail[start:])
        self.lines += end_lineno - self.lineno
        self.lineno = end_lineno
