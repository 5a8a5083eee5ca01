"""What a file's first bytes say it is, when that is not a text log."""

from __future__ import annotations

import codecs
import os
import re
import stat

# A file is taken for binary, not a log, when its first bytes hold a NUL and this
# share of control bytes (a log's own are tabs, line ends and ANSI escapes).
SNIFF_BYTES = 8000
BINARY_SHARE = 0.1
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\x1b") + b"\x7f"
# A run of NULs is a hole, not content: a log truncated under a writer that kept
# its offset (logrotate's copytruncate) starts over after one.
_HOLE = re.compile(rb"\x00{16,}")
# What a rotated or archived log may be compressed with, by its first bytes (bzip2's
# "BZh" could begin a text line: its block size digit and first block's magic follow).
_COMPRESSIONS = {"gzip": re.compile(rb"\x1f\x8b"), "bzip2": re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)"),
                 "xz": re.compile(rb"\xfd7zXZ\x00"), "zstd": re.compile(rb"\x28\xb5\x2f\xfd")}


def compression(head: bytes) -> str | None:
    """The compression a stream's first bytes say it has (None: none)."""
    return next((name for name, magic in _COMPRESSIONS.items() if magic.match(head)), None)
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# A safetensors file opens on its JSON header's length (8 bytes, little-endian, at
# most 100 MB: NULs no text has) and the header, text enough to pass for a log.
SAFETENSORS_MAX_HEADER = 100 << 20


def _binary(head: bytes) -> bool:
    head = _HOLE.sub(b"", head[:SNIFF_BYTES])
    return b"\x00" in head and sum(head.count(c) for c in _CONTROL) > BINARY_SHARE * len(head)


def _safetensors(head: bytes) -> bool:
    return head[8:10] == b'{"' and int.from_bytes(head[:8], "little") <= SAFETENSORS_MAX_HEADER


def not_a_log(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is no log (None: it may be one).
    UTF-16 text (after its byte-order mark) is a log, though it holds NULs."""
    if head.startswith(UTF16_BOMS):
        return None
    if _safetensors(head):
        return "this is a safetensors weight file, not a log"
    if _binary(head):
        return "this is a binary file, not a log (NUL and control bytes in its first 8 KB)"
    return None


def is_device(what: int | str) -> bool:
    """Whether a path or an open descriptor is a character or block device (/dev/zero: read for ever, never a
    log). Not /dev/null (an empty log), nor a terminal on a descriptor (standard input a user pastes a log into)."""
    try:
        st = os.stat(what)
    except OSError:  # no such path yet: watch waits for it
        return False
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat(os.devnull).st_rdev:
        return False
    return (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)) and not (isinstance(what, int) and os.isatty(what))
