"""``diagnose``: read a finished (or still growing) log and return its verdict."""

from __future__ import annotations

import bz2
import codecs
import itertools
import lzma
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from typing import BinaryIO, cast

from ._exceptions import InputError
from ._sniff import UTF16_BOMS, compression, is_device, not_a_log
from .engine import Engine
from .judge import Judge, Verdict
from .ledger.memory import Memory
from .ledger.store import Ledger

CHUNK = 4 << 20
GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib reads the gzip header and trailer itself


def _chunks(stream: BinaryIO, limit: int | None) -> Iterator[bytes]:
    remaining = limit
    while remaining is None or remaining > 0:
        chunk = stream.read(CHUNK if remaining is None else min(CHUNK, remaining))
        if not chunk:
            return
        if remaining is not None:
            remaining -= len(chunk)
        yield chunk


def _gunzipped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The text of gzip members (logrotate's server.log.1.gz; several, as ``cat a.gz b.gz`` makes), CHUNK bytes
    at most at a time (a small file may hold gigabytes of one repeated line); a member cut short gives what it
    holds, as zcat does before it complains."""
    inflate = zlib.decompressobj(GZIP_WBITS)
    for data in chunks:
        while data:
            try:
                text = inflate.decompress(data, CHUNK)
            except zlib.error as e:
                raise InputError(f"damaged gzip data ({e})") from None
            yield text
            if inflate.eof:  # the next member, unless what follows is the NUL padding gzip also ignores
                data = inflate.unused_data.lstrip(b"\x00")
                inflate = zlib.decompressobj(GZIP_WBITS)
            else:
                data = inflate.unconsumed_tail
    yield inflate.flush()


def _unpacked(chunks: Iterator[bytes], new) -> Iterator[bytes]:
    """The text of bzip2 or xz streams (several, as ``cat a.xz b.xz`` makes), CHUNK bytes at most at a
    time; a stream cut short gives what it holds."""
    unpack = new()
    for data in chunks:
        while True:
            try:
                text = unpack.decompress(data, CHUNK)
            except (OSError, EOFError, lzma.LZMAError) as e:
                raise InputError(f"damaged compressed data ({e})") from None
            yield text
            data = b""
            if unpack.eof:  # the next stream, unless what follows is padding
                data = unpack.unused_data.lstrip(b"\x00")
                if not data:
                    break
                unpack = new()
            elif unpack.needs_input:
                break


def diagnose_stream(stream: BinaryIO, server: str | None = None, limit: int | None = None) -> Verdict:
    """Run every line of a binary stream through the rules and the judge; a
    gzip-, bzip2- or xz-compressed stream (a rotated log) is read as the log it holds.

    ``limit`` stops after that many bytes: a file still being written is read
    as far as it went when diagnose started.
    """
    engine = Engine(server=server)
    judge = Judge(server=server)
    chunks: Iterator[bytes] = _chunks(stream, limit)
    head = next(chunks, b"")
    chunks = itertools.chain([head], chunks)
    packed = compression(head)
    if packed == "gzip":
        chunks = _gunzipped(chunks)
    elif packed == "bzip2":
        chunks = _unpacked(chunks, bz2.BZ2Decompressor)
    elif packed == "xz":
        chunks = _unpacked(chunks, lzma.LZMADecompressor)
    elif packed == "zstd":
        raise InputError("a zstd-compressed log: unpack it first (zstd -d, or zstdcat FILE | firedup diagnose -)")
    first = True
    utf16 = None
    for chunk in chunks:
        if not chunk:
            continue
        if first and chunk.startswith(UTF16_BOMS):
            # Windows PowerShell 5 writes a redirected program's output (llama-server > log.txt) as UTF-16
            utf16 = codecs.getincrementaldecoder("utf-16")(errors="replace")
        elif first and (refused := not_a_log(chunk)):
            raise InputError(refused)
        first = False
        if utf16 is not None:
            chunk = utf16.decode(chunk).encode()
        for signal in engine.feed(chunk):
            judge.feed(signal)
    if utf16 is not None:
        # an odd last byte: the replacement character, not a lost line
        for signal in engine.feed(utf16.decode(b"", final=True).encode()):
            judge.feed(signal)
    for signal in engine.close():
        judge.feed(signal)
    return judge.finish()


def diagnose(source: str | os.PathLike | BinaryIO, server: str | None = None, ledger: Ledger | None = None) -> Verdict:
    """Diagnose a log file (a path, ``"-"`` for standard input, or an open binary
    file). ``ledger``: also write the run there (the verdict then carries its ``run_id``)."""
    verdict = _read(source, server)
    if ledger is None:
        return verdict
    log = None if hasattr(source, "read") or str(source) == "-" else os.path.abspath(source)
    memory = Memory(ledger, verdict.server, [], None)
    return memory.remember(verdict, kind="diagnose", name=None, environment=None, log=log)


def _read(source: str | os.PathLike | BinaryIO, server: str | None) -> Verdict:
    if hasattr(source, "read"):
        return diagnose_stream(cast(BinaryIO, source), server)
    if str(source) == "-":
        if is_device(sys.stdin.fileno()):
            raise InputError("standard input is a device, not a log")
        return diagnose_stream(sys.stdin.buffer, server)
    name = os.fspath(source)
    try:
        with open(name, "rb") as f:
            if is_device(name):  # by its path: a terminal named as the log is refused too
                raise InputError(f"{name} is a device, not a log (a log on standard input: firedup diagnose -)")
            st = os.fstat(f.fileno())
            # A regular file may still be growing: read what is there now.
            limit = st.st_size if stat.S_ISREG(st.st_mode) else None
            try:
                return diagnose_stream(f, server, limit)
            except InputError as e:
                raise InputError(f"{name}: {e}") from None
    except OSError as e:
        raise InputError(f"cannot read {name}: {e.strerror or e}") from None
