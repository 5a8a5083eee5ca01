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

import hashlib
import itertools
import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from .lines import ANSI

try:
    import hyperscan
except ImportError:  # platforms without a hyperscan wheel: same results, slower
    hyperscan = None  # type: ignore[assignment]  # the module, or None where it has no wheel

MAX_LINE = 1 << 20
MAX_REDRAW = 4096  # a progress bar's redraw is short: a longer tail is a line being written
TAIL_LINES = 8  # the last lines kept for the engine to read once the input ends (a log's last words)
_ANSI = re.compile(ANSI.pattern.encode())


_START_ANCHOR = re.compile(r"(^|\||\((?:\?:|\?P<\w+>)?)\^")
_END_ANCHOR = re.compile(r"(?<!\\)\$(?=\||\)|$)")


def prefilter_pattern(pattern: str) -> bytes:
    # Python patterns are matched against a message with its prefixes removed
    # (and its line end, \r or \n, cut); in the raw stream the message starts
    # anywhere in the line, so the anchors go.
    return _END_ANCHOR.sub("", _START_ANCHOR.sub(r"\1", pattern)).encode()


class Prefilter:
    """Which patterns match where in a buffer: a sorted list of (end offset, pattern id).

    ``tags`` say what each pattern stands for; the scanner hands them on."""

    def __init__(self, patterns: Sequence[str], tags: Sequence[object]):
        self.tags = list(tags)
        self.patterns = [prefilter_pattern(p) for p in patterns]
        if hyperscan is not None:
            self._db = _load_or_compile(self.patterns)
            self._scratch = threading.local()  # a scratch serves one scan at a time: one per thread
        else:
            self._compiled = [re.compile(p, re.MULTILINE) for p in self.patterns]

    def scan(self, buf: bytes) -> list[tuple[int, int]]:
        hits: list[tuple[int, int]] = []
        if hyperscan is not None:
            def on_match(pid: int, start: int, end: int, flags: int, context: object) -> None:
                hits.append((end, pid))

            scratch = getattr(self._scratch, "space", None)
            if scratch is None:  # watch A B: each target's thread scans with the same compiled database
                scratch = self._scratch.space = hyperscan.Scratch(self._db)
            self._db.scan(buf, match_event_handler=on_match, scratch=scratch)
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


def _compile(patterns: list[bytes]):
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    flag = hyperscan.HS_FLAG_PREFILTER | hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY
    db.compile(expressions=patterns, ids=list(range(len(patterns))), elements=len(patterns),
               flags=[flag] * len(patterns))
    return db


def _load_or_compile(patterns: list[bytes]):
    """Compiling the rule set takes a fifth of a second; loading it back, microseconds.
    The compiled database is kept in the user's cache directory, named by its content."""
    key = hashlib.sha256(b"\0".join([getattr(hyperscan, "__version__", "").encode(), *patterns])).hexdigest()[:24]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "firedup" / f"{key}.hsdb"
    try:
        return hyperscan.loadb(cache.read_bytes(), hyperscan.HS_MODE_BLOCK)
    except (OSError, hyperscan.error):
        pass
    db = _compile(patterns)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(hyperscan.dumpb(db))
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home only costs the compile next time
    return db


def _end_of_segment(buf: bytes, start: int) -> int:
    nl = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, nl if nl >= 0 else len(buf))
    if cr >= 0:
        return cr
    return nl if nl >= 0 else len(buf)


class Scanner:
    """Feed bytes, get ``(lineno, segment, tags of the patterns that hit it)`` for
    the lines that matter. ``prefilter`` may be swapped between feeds."""

    def __init__(self, prefilter: Prefilter):
        self.prefilter = prefilter
        self.dense = False
        self.lineno = 1  # line number where the carried-over tail starts
        self.lines = 0  # complete lines seen
        self.tail: list[tuple[int, bytes]] = []  # the last TAIL_LINES non-blank segments, last one last
        self._last_region: tuple[bytes, int] = (b"", 1)  # the last region with a non-blank line, and its end's line
        self._tail = b""
        self._redrawn = False  # whether the tail is a redraw after a carriage return
        self._region_redrawn = False  # whether the region being read begins so (its first segment)
        self._at: tuple[bytes, int, int] = (b"", 0, 0)  # the last segment yielded: its region, start, line number

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes, list[object]]]:
        buf = self._tail + data if self._tail else data
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        if cut == 0 and len(buf) > MAX_LINE:
            cut = len(buf)
        self._tail = buf[cut:]
        if cut:
            self._region_redrawn, self._redrawn = self._redrawn, buf[cut - 1] == 0x0D
            yield from self._region(buf[:cut] if cut < len(buf) else buf)

    @property
    def last(self) -> tuple[int, bytes] | None:
        """The last non-blank segment: its line number and bytes."""
        return self.tail[-1] if self.tail else None

    @property
    def redraw(self) -> bytes | None:
        """The unfinished redraw at the end of what was fed (a progress bar
        redrawn with ``\\r`` ends only when the next redraw starts), or None."""
        return self._tail if self._redrawn and 0 < len(self._tail) <= MAX_REDRAW else None

    @property
    def after_carriage_return(self) -> bool:
        """Whether the segment yielded last began right after a ``\\r``: a
        redraw of the line before it."""
        region, start, _ = self._at
        return region[start - 1] == 0x0D if start else self._region_redrawn

    def lines_before(self) -> Iterator[tuple[int, bytes]]:
        """The non-blank lines before the segment yielded last, nearest first:
        line number and bytes (where a start had got when a stop or a
        traceback came). Before its region, the tail's."""
        region, start, lineno = self._at
        first = lineno
        for first, line in _lines_back(region, lineno, start):  # no copy of the region
            yield first, line
        yield from reversed([item for item in self.tail if item[0] < first])

    def back(self) -> Iterator[tuple[int, bytes]]:
        """The non-blank lines of the last region read, last one first."""
        return _lines_back(*self._last_region)

    def close(self) -> Iterator[tuple[int, bytes, list[object]]]:
        tail, self._tail = self._tail, b""
        if tail:
            yield from self._region(tail)

    def flush(self) -> Iterator[tuple[int, bytes, list[object]]]:
        """The unfinished last line as it stands, unless it is a redraw. What
        comes next continues on the same line number."""
        if self._redrawn or not self._tail:
            return iter(())
        return self.close()

    def _region(self, region: bytes) -> Iterator[tuple[int, bytes, list[object]]]:
        if b"\x1b" in region or b"#033[" in region:  # colour codes can sit inside the words rules look for
            region = _ANSI.sub(b"", region)
        prefilter = self.prefilter
        hits = prefilter.scan(region)
        n = len(region)
        nh = len(hits)
        lineno, counted = self.lineno, 0
        pos = i = 0
        while pos < n:
            if self.prefilter is not prefilter:  # the engine moved to another stage
                prefilter = self.prefilter
                hits = [(end + pos, pid) for end, pid in prefilter.scan(region[pos:])]
                nh = len(hits)
                i = 0
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
            tags = []
            while i < nh and hits[i][0] - 1 < end:
                if hits[i][0] - 1 >= start:
                    tags.append(prefilter.tags[hits[i][1]])
                i += 1
            segment = region[start:end]
            pos = end + 1
            if segment.strip():
                lineno += region.count(b"\n", counted, start)
                counted = start
                self._at = (region, start, lineno)
                yield lineno, segment, tags
        end_lineno = lineno + region.count(b"\n", counted)
        tail = list(itertools.islice(_lines_back(region, end_lineno), TAIL_LINES))
        if tail:
            self.tail = (self.tail + tail[::-1])[-TAIL_LINES:]
            self._last_region = (region, end_lineno)
        self.lines += end_lineno - self.lineno
        self.lineno = end_lineno


def _lines_back(region: bytes, lineno: int, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a region (up to ``end``) whose end is on line ``lineno``, last one first."""
    pos = len(region) if end is None else end
    while True:
        end = pos
        while end and region[end - 1] in b" \t\r\n":
            end -= 1
        if not end:
            return
        start = max(region.rfind(b"\n", 0, end), region.rfind(b"\r", 0, end)) + 1
        lineno -= region.count(b"\n", start, pos)
        yield lineno, region[start:end]
        pos = start
