"""Assemble Python traceback blocks from interleaved, prefixed worker output.

A block runs from ``Traceback (most recent call last):`` through its frames to
the exception line, across chained exceptions. Blocks are kept per origin (the
worker prefix), so two workers dying at once do not mix. A closed block yields
one ``exception`` signal per exception in its chain, root first, with the
indented lines that continue its message (``data["caught"]``: a handler caught
it and raised the next, "During handling of the above exception"); a block cut
off before its exception line yields a ``traceback`` signal at the last frame
or source line it got to.
A window that starts inside a traceback opens a block at its first frame
(headless: no header; frames alone yield nothing unless the input ends in them
on an error record's lines). Each exception says whether its block's frames pass
through an HTTP server's handling of a request (``data["request"]``) or vLLM
V0's engine loop (``data["engine"]``). An exception line outside any block (a
log window that starts after the frames) yields a bare ``exception`` signal,
and so does the ``what():`` line under which C++ prints an uncaught exception's
message (``data["what"]``).
TorchScript's exception carries its own tracebacks in its message and ends
in the exception it wraps: both are exceptions of the block, the wrapper
marked ``data["wraps"]``.
"""

from __future__ import annotations

import re

from .lines import Line, parse
from .signals import Signal

HEADER = re.compile(r"Traceback \(most recent call last\):\s*$")
CHAIN = re.compile(
    r"(?:The above exception was the direct cause of the following exception|"
    r"During handling of the above exception, another exception occurred):\s*$"
)
# Any exception line once frames have been seen ("KeyboardInterrupt", "x.y.Error: msg").
_IN_BLOCK = re.compile(r"[A-Za-z_][\w.]*(?::.*)?$")
# A logger line that says something failed without naming the exception:
# with exc_info, Python's logging prints the traceback on the lines right after
# it, and that record's level is the traceback's ("WARN ... Could not import
# Flash Attention enabled models"). A line that names the exception itself
# ("Failed to import ... with ImportError('...')") was logged without it: a
# traceback after it is another one.
_FAILED = re.compile(r"(?i)could not|couldn't|cannot|can't|unable|fail")
# Python reporting an exception it could not raise (in __del__, at interpreter exit)
# and went on: the traceback after it was handled, as a warning's would be.
_IGNORED = re.compile(r"Exception ignored (?:in|on calling)\b")
_NAMED = re.compile(r"[A-Za-z]\w*(?:Error|Exception)\b")
# A frame's location line; the one just above an exception says where it was raised.
_FRAME = re.compile(r"(?:\s+|> )File \"")
# Python 3.11+'s markers under a statement ("    ^^^^^^^^").
_CARETS = re.compile(r"\s*[\^~]+\s*$")
# loguru's backtrace marks the frame that raised with "> " instead of indenting it.
_MARKED = "> File \""
_FLAT_FRAME = "File \""
# An exception line with no traceback around it: the name must say it is one
# ("Error: X" alone is how Rust and Go programs report, not Python).
BARE = re.compile(r"(?!Error:)(?:[A-Za-z_]\w*\.)*[A-Za-z_]*(?:Error|Exception)(?::(?:\s.*)?)?$")
# What the scanner must hand over for this module to see blocks and bare exceptions.
# The message of an uncaught C++ exception, under "terminate called after throwing ...".
WHAT = re.compile(r"\s*what\(\):\s+\S")
PREFILTER = (r"Traceback \(most recent call last\)", r"(?:Error|Exception)(?::\s|\s*$)", r"what\(\):\s",
             r'File "[^"\n]+", l',
             r"\bWARN(?:ING)?\b.{0,300}(?:[Cc]ould not|[Cc]ouldn't|[Cc]annot|[Uu]nable|[Ff]ail)")
# TorchScript's exception: "RuntimeError: The following operation failed in the
# TorchScript interpreter." goes on with TorchScript's own tracebacks (source
# lines at any indent among them), then the exception it wraps: the cause.
_INTERPRETER = "failed in the TorchScript interpreter"
_TORCHSCRIPT = "Traceback of TorchScript"
# A frame of an HTTP server handling a request (uvicorn's, starlette's and
# fastapi's, aiohttp's), or of a server's OpenAI layer answering one (which
# catches the error and logs it with its traceback): an exception raised through
# it is that request's, answered with an error. Start-up runs through other
# frames (lifespan, the layer's __init__, vLLM's create_server_socket).
_REQUEST_FRAME = re.compile(
    r'File "[^"]*/(?:uvicorn/protocols/http/\w+\.py", line \d+, in run_asgi'
    r'|fastapi/routing\.py", line \d+, in run_endpoint_function'
    r'|starlette/routing\.py", line \d+, in handle'
    r'|aiohttp/web_protocol\.py", line \d+, in _handle_request'
    r'|starlette/responses\.py", line \d+, in render'
    r'|vllm/entrypoints/openai/(?:serving_\w+|api_server)\.py", line \d+, in '
    r'(?:create_(?:chat_completion|completion|embedding|pooling|score|rerank|responses|transcription|translation)'
    r'|\w*_generator|_preprocess_\w+|_normalize_prompt\w*|_validate_input|_tokenize_prompt\w*)'
    r'|vllm/entrypoints/chat_utils\.py", line \d+, in _?parse_chat_message\w*'
    r'|sglang/srt/entrypoints/openai/serving_\w+\.py", line \d+, in '
    r'(?:handle_request|_handle_\w*request|_convert_to_internal_request|_process_messages|\w*_generator)'
    r'|sglang/srt/openai_api/adapter\.py", line \d+, in v1_\w+'
    r'|sglang/srt/entrypoints/http_server\.py", line \d+, in (?:openai_v1_\w+|generate_request)'
    r'|lmdeploy/serve/openai/api_server\.py", line \d+, in \w+_v1)\b')
# A vLLM record logged by its OpenAI layer answering one request (the serving
# classes, the tool and reasoning parsers): "ERROR 06-04 11:39:38 [serving_chat.py:199] ".
# Such a layer logs each line of a request's traceback under its own name, so a
# window cut after the frames still says whose the exception was.
_REQUEST_SITE = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
                          r"\[?(?:serving(?:_\w+)?|\w+_(?:tool|reasoning)_parser)\.py:\d+\] ")


def request_site(text: str) -> bool:
    # the substrings spare the pattern on nearly every line
    return ("serving" in text or "_parser.py:" in text) and bool(_REQUEST_SITE.search(text))


# A frame of vLLM's engine step: V0's engine loop, V1's worker executing the
# model or its engine core's step. An exception raised through it killed the
# engine, whichever request's traceback shows it.
_ENGINE_FRAME = re.compile(
    r'File "[^"]*/vllm/(?:engine/async_llm_engine\.py", line \d+, in (?:run_engine_loop|engine_step)'
    r'|engine/llm_engine\.py", line \d+, in step'  # V0's LLMEngine: vllm.LLM's, and MQLLMEngine's
    r'|v1/worker/gpu_worker\.py", line \d+, in execute_model'
    r'|v1/engine/core\.py", line \d+, in (?:step|step_with_batch_queue|execute_model))\b')
# A frame as Python's traceback prints it ('File "x.py", line 1, in f', or cut
# where a terminal wrapped it), not faulthandler's ('File "x.py", line 1 in f').
_PYTHON_FRAME = re.compile(r'\s*(?:> )?File "[^"]+"(?!, line \d+ in )')
# A block whose origin has written nothing for this many lines is closed.
_MAX_SILENCE = 200


class _Block:
    __slots__ = ("origin", "aliases", "lineno", "text", "level", "exceptions", "details", "frames", "frame", "state",
                 "last", "before", "caught", "wrappers", "statement", "statements", "flat", "margin", "headless",
                 "request", "engine", "said")

    def __init__(self, origin: str, lineno: int, text: str, level: str = "", aliases: set[str] | None = None):
        self.origin = origin
        # a header inside a record: its lines carry no prefix of their own, or
        # (behind docker compose, journald) the same one as the header's line,
        # or the outermost of its prefixes ("vllm-1  | [... TP2] ...")
        self.aliases = aliases or set()
        self.lineno = lineno
        self.text = text
        self.level = level  # the level of the log record the traceback belongs to, when its header has none
        self.exceptions: list[tuple[int, Line]] = []
        self.details: dict[int, list[tuple[int, Line]]] = {}  # indented lines after an exception line
        self.frames: dict[int, str] = {}  # each exception's innermost frame ('File "x.py", line 1, in f')
        self.frame = ""  # the last frame line read
        self.statement = ""  # the source line under it ("assert x % tp_size == 0")
        self.statements: dict[int, str] = {}  # each exception's innermost statement
        self.caught: set[int] = set()  # exceptions a handler caught and then raised another in ("During handling")
        self.wrappers: set[int] = set()  # exceptions whose message ends in the exception they wrap (TorchScript's)
        self.state = "frames"  # frames → exception → (chain → frames …); torchscript → exception
        self.last = lineno
        self.before: tuple[int, str] | None = None  # the line before the header, for the reader to fill in
        # the last line was a frame at the margin (a paste that lost its indent): its source line follows
        self.flat = False
        # the indent of a traceback printed inside an indented message (Ray Serve's status,
        # a YAML block): its exception line has it, its frames more
        self.margin = 0
        # begun at a frame, its header cut off (a window that starts inside a traceback)
        self.headless = False
        self.request = False  # its frames pass through an HTTP server's handling of a request
        self.engine = False  # its frames pass through the engine's own loop
        # the last frame or source line read: where a traceback cut off before its exception got
        self.said: tuple[int, Line] | None = None

    def see(self, frame: str) -> None:
        self.request = self.request or bool(_REQUEST_FRAME.match(frame))
        self.engine = self.engine or bool(_ENGINE_FRAME.match(frame))


class Assembler:
    def __init__(self) -> None:
        self._blocks: dict[str, _Block] = {}
        # Whether the last line fed was a frame (source code, carets) or a
        # chain separator: rules must not read "raise OSError(98, ...)".
        self.absorbed = False
        # Whether the last line fed became part of a block (its header, a
        # frame, an exception line, a continued message): not a warning of its
        # own. A line of another worker written while a block is open is not.
        self.consumed = False
        self.block: _Block | None = None  # the block the last line fed joined (or opened)
        self._before = (0, "", "")  # the last line's (lineno, origin, level) when it said something failed

    @property
    def open(self) -> bool:
        return bool(self._blocks)

    @property
    def midway(self) -> bool:
        """Whether a traceback stopped before its exception line (its frames
        written, the rest still in a pipe's or a relay's buffer)."""
        return any(block.state != "exception" for block in self._blocks.values())

    def feed(self, lineno: int, line: Line) -> list[Signal]:
        self.absorbed = self.consumed = False
        self.block = None
        out: list[Signal] = []
        msg = line.message
        header = HEADER.search(msg)
        # "Scheduler hit an exception: Traceback ..." puts the header inside a
        # prefixed record; the frames that follow carry no prefix.
        origin = "" if header and header.start() > 0 else line.origin
        block = self._blocks.get(origin)
        if block is None and origin:
            inner = self._blocks.get("")
            block = inner if inner is not None and origin in inner.aliases else None
        if header:
            self.consumed = True
            if block is not None and block.state == "chain":
                block.state = "frames"
                block.last = lineno
                self.block = block
                return out
            if block is not None:
                out += self._close(block)
            own = self._blocks.get(line.origin) if origin != line.origin else None
            if own is not None:
                # the header sits inside a record of an origin whose block was open: that block
                # ended, as it would at any other line of that origin that is not its own
                out += self._close(own)
            # the record just before (or, for one structured record, the same line: its first line)
            level = self._before[2] if not line.level and self._before[0] in (lineno - 1, lineno) \
                and self._before[1] == origin else ""
            aliases = {line.origin, line.outer} - {origin, ""}
            self.block = self._blocks[origin] = _Block(origin, lineno, line.text, level, aliases)
            self.block.margin = len(msg) - len(msg.lstrip(" "))
            self.block.request = request_site(line.text)
            return self._expire(lineno, out)
        if block is None and _PYTHON_FRAME.match(msg):
            # a window that starts inside a traceback: its frames still say where it was raised
            block = self._blocks[origin] = _Block(origin, lineno, line.text, line.level)
            block.headless = True
        if block is not None:
            if block.margin and msg[:block.margin].isspace() and not msg[block.margin:block.margin + 1].isspace():
                msg = msg[block.margin:]
                line = line._replace(message=msg)
            if self._join(block, lineno, line):
                block.last = lineno
                block.request = block.request or request_site(line.text)
                self.consumed = True
                self.block = block
                return out
            out += self._close(block)
        if line.level and _FAILED.search(msg) and not _NAMED.search(msg):
            self._before = (lineno, line.origin, line.level)
        elif _IGNORED.match(msg):
            self._before = (lineno, line.origin, "WARNING")
        if BARE.match(msg):
            out.append(Signal("exception", lineno, line.text, origin=line.origin,
                              data={"message": msg, "request": request_site(line.text)},
                              message=line.message, level=line.level))
        elif WHAT.match(msg):
            out.append(Signal("exception", lineno, line.text, origin=line.origin,
                              data={"message": msg.strip(), "what": True}, message=line.message, level=line.level))
        return self._expire(lineno, out)

    def _join(self, block: _Block, lineno: int, line: Line) -> bool:
        """Whether ``line`` belongs to ``block`` (a frame, an exception, a chain, a message going on)."""
        msg = line.message
        if not msg:
            # a record's empty line ("ERROR 06-10 16:33:51 [core.py:398]" alone): the
            # blank line between an exception and its chain, as a logger prints it
            self.absorbed = True
            return True
        if block.state == "frames":
            if msg[:1].isspace() or msg.startswith(_MARKED):
                self.absorbed = True
                block.flat = False
                if _FRAME.match(msg):
                    block.frame, block.statement = msg.lstrip(" >"), ""
                    block.see(block.frame)
                    block.said = (lineno, line)
                elif not block.statement and not _CARETS.match(msg):
                    block.statement = msg.strip()
                    block.said = (lineno, line)
                return True
            if msg.startswith(_FLAT_FRAME) or block.flat or (block.statement and _CARETS.match(msg)):
                # a traceback pasted with its indent lost: a frame at the margin, its source
                # line (whatever it looks like) right under it, then carets
                self.absorbed = True
                if msg.startswith(_FLAT_FRAME):
                    block.frame, block.statement, block.flat = msg, "", True
                    block.see(block.frame)
                    block.said = (lineno, line)
                elif block.flat:
                    block.statement, block.flat = msg.strip(), False
                    block.said = (lineno, line)
                return True
            # before any frame only a name that says it is an exception ends the block
            # ("Error: DownloadError" is TGI's launcher, interleaved under a header)
            if _IN_BLOCK.match(msg) and ((block.frame and not block.headless) or BARE.match(msg)):
                block.exceptions.append((lineno, line))
                block.frames[lineno] = block.frame
                block.statements[lineno] = block.statement
                block.state = "exception"
                return True
        elif block.state == "torchscript":
            # TorchScript's own traceback, until the exception it wraps
            if BARE.match(msg):
                block.exceptions.append((lineno, line))
                block.frames[lineno] = block.frame
                block.state = "exception"
            else:
                self.absorbed = True
                if _FRAME.match(msg):
                    block.frame = msg.lstrip()
            return True
        elif block.state == "exception" and msg.startswith(_TORCHSCRIPT) and block.exceptions \
                and _INTERPRETER in block.exceptions[-1][1].message:
            block.wrappers.add(block.exceptions[-1][0])
            block.state = "torchscript"
            self.absorbed = True
            return True
        elif chain := CHAIN.match(msg):
            if block.exceptions and (chain.group(0).startswith("During handling")
                                     or ":" not in block.exceptions[-1][1].message):
                # a handler raised another in it; or, with "raise ... from", one with no
                # message ("TimeoutError") under the one that says what timed out
                block.caught.add(block.exceptions[-1][0])
            block.state = "chain"
            self.absorbed = True
            return True
        elif block.state == "exception" and msg[:1].isspace():
            # the message goes on, indented (pydantic's "  Value error, ...")
            block.details.setdefault(block.exceptions[-1][0], []).append((lineno, line))
            return True
        return False

    def close(self) -> list[Signal]:
        out: list[Signal] = []
        for block in list(self._blocks.values()):
            out += self._close(block, cut=True)
        return out

    def close_answered(self, before: int) -> list[Signal]:
        """Close the blocks opened before a line that have their exception
        already (another worker's traceback, interleaved): a fatal line read
        now must not be judged without them."""
        out: list[Signal] = []
        for block in list(self._blocks.values()):
            if block.state == "exception" and block.lineno < before:
                out += self._close(block)
        return out

    def _expire(self, lineno: int, out: list[Signal]) -> list[Signal]:
        for block in list(self._blocks.values()):
            if lineno - block.last > _MAX_SILENCE:
                out += self._close(block)
        return out

    def _close(self, block: _Block, cut: bool = False) -> list[Signal]:
        """``cut``: the input ended in it."""
        del self._blocks[block.origin]
        if not block.exceptions:
            if block.headless and not (cut and block.level in ("ERROR", "CRITICAL", "FATAL")):
                # frames alone: a stack printed, no error (the log goes on), or a window
                # of frames that says nothing of how it ended (no error record's level)
                return []
            # cut off before its exception: the failing line it got to is the evidence, or
            # the error record right above its header (logging's exception(): the message
            # the handler logged with it, often the exception's own)
            lineno, said = block.said or (block.lineno, parse(block.text))
            if block.before is not None and block.before[0] == block.lineno - 1:
                logged = parse(block.before[1])
                if logged.level in ("ERROR", "CRITICAL", "FATAL") and logged.origin == block.origin:
                    lineno, said = block.before[0], logged
            return [Signal("traceback", lineno, said.text, origin=block.origin,
                           data={"traceback": block.lineno, "header": block.text, "request": block.request,
                                 "engine": block.engine}, message=said.message, level=said.level or block.level)]
        return [
            Signal("exception", lineno, line.text, origin=line.origin,
                   data={"message": line.message, "chain": i, "traceback": block.lineno,
                   "level": line.level or block.level, "caught": lineno in block.caught,
                         "wraps": lineno in block.wrappers, "request": block.request, "engine": block.engine,
                         "header": block.text, "details": block.details.get(lineno, []),
                   "frame": block.frames.get(lineno, ""), "statement": block.statements.get(lineno, "")},
                   message=line.message, level=line.level)
            for i, (lineno, line) in enumerate(block.exceptions)
        ]
