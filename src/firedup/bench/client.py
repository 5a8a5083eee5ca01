"""A lean streaming client for OpenAI-compatible servers: HTTP/1.1 on
keep-alive sockets read straight from the event loop, responses and their SSE
events parsed as the bytes arrive, so the client adds as little as possible
to what it measures. (aiohttp, which ``vllm bench serve`` uses, spends most of
a small request in its own machinery.)

Bytes are timed by the kernel when they reach the socket (``SO_TIMESTAMPNS``,
on Linux), not when the client gets round to reading them: when a batched
server sends a token to hundreds of streams at once, the last stream's token
is still timed when it came. How late the client read is kept as well
(``Endpoint.read_lag``), as a measure of the client's own health."""

from __future__ import annotations

import array
import asyncio
import errno
import json
import platform
import socket
import struct
import sys
import time
from collections.abc import Callable

from .. import _url
from .._exceptions import HttpError, InputError
from .metrics import RequestResult

READ_SIZE = 1 << 18
# SO_TIMESTAMPNS is 35 in asm-generic (x86-64, arm64); Python's socket module does not name it.
_TIMESTAMPNS = 35 if sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64") else None
_ANCILLARY = socket.CMSG_SPACE(16) if _TIMESTAMPNS else 0
_DECODER = json.JSONDecoder()
# A stream's finish_reason when the server gave up on the request (vLLM's "abort", SGLang's "abort", "error").
ABORTED = ("abort", "error", "cancelled")
CONNECT_TIMEOUT = 10.0  # a host that drops the handshake is not waited on for the kernel's minutes
# A server that takes a request and then sends nothing is not waited on for ever: seconds without a byte of the
# answer to a plain request (/v1/models, a tokenize endpoint, /metrics), and, for a streamed completion, without a
# byte from the server on any of its connections (a request queued behind others sends nothing until it is
# scheduled, for as long as the run before it takes, while the others stream).
ANSWER_TIMEOUT = 30.0
STREAM_IDLE_TIMEOUT = 300.0


class NoAnswer(HttpError):
    """The server took a request and sent nothing back for the time allowed."""


class NotListening(ConnectionRefusedError):
    """Nothing listens at the server's address: the connection was refused."""

    def __init__(self, url: str):
        super().__init__(errno.ECONNREFUSED, f"nothing is listening at {url}")

    def __str__(self) -> str:
        return str(self.strerror)


def enable_timestamps(sock: socket.socket) -> None:
    if _TIMESTAMPNS:
        sock.setsockopt(socket.SOL_SOCKET, _TIMESTAMPNS, 1)


def receive(sock: socket.socket) -> tuple[bytes, float, float] | None:
    """What a non-blocking socket holds (b"" once it closed), when it reached
    the socket on the perf_counter clock and how long ago that was; None when
    there is nothing to read. The kernel stamps on the wall clock: only the
    short interval between its stamp and now is taken from that clock."""
    try:
        data, ancillary, _, _ = sock.recvmsg(READ_SIZE, _ANCILLARY)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b"", time.perf_counter(), 0.0
    wall, now = time.time_ns(), time.perf_counter()  # side by side: a preemption between them is lag misread
    for level, kind, stamp in ancillary:
        if level == socket.SOL_SOCKET and kind == _TIMESTAMPNS and len(stamp) >= 16:
            sec, nsec = struct.unpack("qq", stamp[:16])
            lag = max(0, wall - sec * 1_000_000_000 - nsec) / 1e9
            return data, now - lag, lag
    return data, now, 0.0


class Endpoint:
    def __init__(self, url: str, api_key: str | None = None):
        parts, self.host = _url.split(url)
        if parts.scheme != "http":
            raise InputError(f"only http:// servers can be measured: {url}")
        # A path is the API's base behind a gateway (http://gw/team-a: POST /team-a/v1/completions); a trailing
        # /v1 is the OpenAI clients' base_url and means the same.
        self.prefix = parts.path.rstrip("/").removesuffix("/v1")
        if "/v1/" in f"{self.prefix}/" or parts.query:
            raise InputError(f"bench takes the server's base URL (http://host:port, or http://host/prefix behind a "
                             f"gateway), not an endpoint's: {url}")
        self.port = parts.port or 80
        self.base = f"http://{parts.netloc}{self.prefix}"
        self.authority = parts.netloc
        self.auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self.read_lag = array.array("d")  # seconds between the kernel's stamp and the client's read
        self.heard = 0.0  # when a byte last arrived on any connection
        self._addresses: list | None = None

    async def connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        if self._addresses is None:
            try:
                self._addresses = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except socket.gaierror as e:
                raise OSError(f"cannot resolve the host {self.host}: {e.strerror}") from None
        error: OSError = OSError(f"cannot resolve {self.host}")
        for family, kind, proto, _, address in self._addresses:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, address), CONNECT_TIMEOUT)
            except TimeoutError:  # asyncio's too, since 3.11
                sock.close()
                error = OSError(f"no answer from {self.authority} in {CONNECT_TIMEOUT:g} s")
                continue
            except ConnectionRefusedError:
                sock.close()
                error = NotListening(self.base)
                continue
            except OSError as e:
                sock.close()
                error = e
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            enable_timestamps(sock)
            return Connection(self, sock)
        raise error


class _Response:
    """One HTTP/1.1 response, parsed as its bytes arrive. Body pieces (a chunk
    of a chunked body, or what came) go to ``on_piece(piece, arrived)`` while
    the status is 200; any other body is kept for the error message."""

    def __init__(self, on_piece: Callable[[bytes, float], None] | None):
        self.on_piece = on_piece
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.buf = b""  # received and not yet parsed from self.pos on
        self.pos = 0
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = bytearray()  # kept when there is no on_piece, or the status is not 200
        self.last = 0.0  # when the last byte arrived
        self._state = self._head
        self._left = 0

    @property
    def leftover(self) -> bytes:
        return self.buf[self.pos:]

    def feed(self, data: bytes, arrived: float) -> None:
        self.buf = self.buf[self.pos:] + data if self.pos < len(self.buf) else data
        self.pos = 0
        self.last = arrived
        try:
            while not self.done.done() and self._state(arrived):
                pass
        except Exception as e:  # whatever a server sends, the request ends rather than hangs
            self.fail(e if isinstance(e, HttpError) else HttpError(f"malformed response: {e!r}"))

    def eof(self, arrived: float) -> None:
        if self._state == self._until_close:
            self._finish()
        else:
            self.fail(HttpError("connection closed by the server"))

    def fail(self, error: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(error)

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def _piece(self, piece: bytes, arrived: float) -> None:
        if self.on_piece is not None and self.status == 200:
            self.on_piece(piece, arrived)
        else:
            self.body += piece

    # Each state consumes what it can from self.pos on and says whether to go on.
    def _head(self, arrived: float) -> bool:
        end = self.buf.find(b"\r\n\r\n", self.pos)
        if end < 0:
            return False
        lines = self.buf[self.pos:end].decode("latin-1").split("\r\n")
        self.pos = end + 4
        try:
            self.status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise HttpError(f"not an HTTP response: {lines[0][:80]!r}") from None
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if self.status in (204, 304) or 100 <= self.status < 200:
            self._finish()
        elif self.headers.get("transfer-encoding", "").lower() == "chunked":
            self._state = self._chunk_size
        elif "content-length" in self.headers:
            self._left = int(self.headers["content-length"])
            self._state = self._sized
        else:
            self._state = self._until_close
        return True

    def _chunk_size(self, arrived: float) -> bool:
        end = self.buf.find(b"\r\n", self.pos)
        if end < 0:
            return False
        self._left = int(self.buf[self.pos:end].partition(b";")[0], 16)
        self.pos = end + 2
        self._state = self._chunk_data if self._left else self._trailer
        return True

    def _chunk_data(self, arrived: float) -> bool:
        end = self.pos + self._left
        if len(self.buf) < end + 2:
            return False
        piece = self.buf[self.pos:end]
        self.pos = end + 2
        self._state = self._chunk_size
        self._piece(piece, arrived)
        return True

    def _trailer(self, arrived: float) -> bool:
        end = self.buf.find(b"\r\n", self.pos)
        if end < 0:
            return False
        last = end == self.pos
        self.pos = end + 2
        if last:
            self._finish()
        return True

    def _sized(self, arrived: float) -> bool:
        end = self.pos + self._left
        if len(self.buf) < end:
            return False
        piece = self.buf[self.pos:end]
        self.pos = end
        self._piece(piece, arrived)
        self._finish()
        return True

    def _until_close(self, arrived: float) -> bool:
        if self.pos < len(self.buf):
            self._piece(self.buf[self.pos:], arrived)
            self.pos = len(self.buf)
        return False


class Connection:
    def __init__(self, endpoint: Endpoint, sock: socket.socket):
        self.endpoint = endpoint
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.closed = False
        self.reusable = True
        self._response: _Response | None = None
        self.loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        received = receive(self.sock)
        if received is None:
            return
        data, arrived, lag = received
        if not data:
            self._hang_up()
            if self._response is not None:
                self._response.eof(arrived)
            return
        self.endpoint.read_lag.append(lag)
        self.endpoint.heard = arrived
        if self._response is None:  # bytes nobody asked for: the connection's framing is lost
            self.reusable = False
            return
        self._response.feed(data, arrived)

    def _hang_up(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.remove_reader(self.sock.fileno())

    def close(self) -> None:
        self._hang_up()
        self.sock.close()

    async def request(self, method: str, path: str, body: bytes = b"",
                      on_piece: Callable[[bytes, float], None] | None = None) -> _Response:
        """Send a request and wait for its whole response; a 200 response's
        body pieces go to ``on_piece`` as they arrive."""
        if self.closed:
            raise HttpError("connection closed by the server")
        endpoint = self.endpoint
        head = (f"{method} {endpoint.prefix}{path} HTTP/1.1\r\nHost: {endpoint.authority}\r\n{endpoint.auth}"
                f"Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n")
        response = self._response = _Response(on_piece)
        idle = ANSWER_TIMEOUT if on_piece is None else STREAM_IDLE_TIMEOUT
        last_byte = (lambda: response.last) if on_piece is None else (lambda: endpoint.heard)
        try:
            await self.loop.sock_sendall(self.sock, head.encode() + body)
            while True:
                heard = last_byte()
                try:
                    await asyncio.wait_for(asyncio.shield(response.done), idle)
                    break
                except TimeoutError:  # asyncio's too, since 3.11
                    if last_byte() == heard:
                        raise NoAnswer(f"no answer to {method} {endpoint.prefix}{path} for {idle:g} s") from None
        except BaseException:
            self.reusable = False
            raise
        finally:
            self._response = None
        if response.leftover or response.headers.get("connection", "").lower() == "close":
            self.reusable = False
        return response

    async def get_json(self, path: str):
        response = await self.request("GET", path)
        if response.status != 200:
            said = bytes(response.body[:200]).decode(errors="replace").strip()
            raise HttpError(f"GET {self.endpoint.prefix}{path} -> {response.status}"
                            + (f": {' '.join(said.split())}" if said else ""))
        return json.loads(response.body)


class _Events:
    """The SSE events of one streamed completion, read into its result as they arrive."""

    def __init__(self, result: RequestResult, chat: bool, start: float):
        self.result = result
        self.chat = chat
        self.start = start
        self.pending = b""
        self.last = 0.0
        self.done = False
        self.usage = False
        self.finish: str | None = None  # the last choice's finish_reason: a stream without one was cut off

    def feed(self, piece: bytes, arrived: float) -> None:
        if self.pending:
            piece = self.pending + piece
        if b"\r" in piece:
            piece = piece.replace(b"\r\n", b"\n")
        *events, self.pending = piece.split(b"\n\n")
        for event in events:
            for line in event.split(b"\n"):
                if line[:5] == b"data:":
                    self._data(line[5:].strip(), arrived)

    def _data(self, data: bytes, arrived: float) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        result = self.result
        chunk = _DECODER.raw_decode(data.decode())[0]
        if not result.id:
            result.id = chunk.get("id") or ""
        usage = chunk.get("usage")
        if usage:
            self.usage = True
            result.prompt_tokens = usage.get("prompt_tokens") or 0
            result.output_tokens = usage.get("completion_tokens") or 0
        choices = chunk.get("choices")
        if not choices:
            return
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish = str(choice["finish_reason"])
        if self.chat:
            delta = choice.get("delta") or {}
            text = delta.get("content") or delta.get("reasoning_content")
        else:
            text = choice.get("text")
        if text:
            if result.chunks == 0:
                result.ttft = arrived - self.start
            else:
                result.itl.append(arrived - self.last)
            self.last = arrived
            result.chunks += 1


async def stream(conn: Connection, path: str, payload: dict, chat: bool, t0: float) -> RequestResult:
    """One streamed completion; times are seconds since ``t0`` (the run's
    start), and its end is when the last byte of the response arrived."""
    body = json.dumps(payload).encode()
    start = time.perf_counter()
    result = RequestResult(ok=False, start=start - t0)
    events = _Events(result, chat, start)
    try:
        response = await conn.request("POST", path, body, events.feed)
        result.latency = response.last - start
        if response.status != 200:
            result.error = f"HTTP {response.status}: {bytes(response.body[:200]).decode(errors='replace')}"
        elif not events.done and result.chunks == 0:
            result.error = "the stream ended without a token"
        elif events.finish is None or events.finish in ABORTED:
            # llama-cpp-python ends a running stream when another request arrives: [DONE], no finish_reason
            why = "with no finish_reason" if events.finish is None else f"with finish_reason {events.finish!r}"
            result.error = (f"the server ended the stream {why} after {result.chunks} token(s): "
                            "cut off, not finished")
        else:
            result.ok = True
            if not events.usage:
                result.usage = False
                result.output_tokens = result.chunks
    except (OSError, HttpError, ValueError) as e:
        conn.reusable = False
        result.latency = time.perf_counter() - start
        result.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return result
