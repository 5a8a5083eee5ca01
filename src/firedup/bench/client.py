"""A lean streaming client for OpenAI-compatible servers: HTTP/1.1 over an
asyncio protocol with keep-alive connections and a small SSE reader, so the
client adds as little as possible to what it measures. (aiohttp, which
``vllm bench serve`` uses, spends most of a small request in its own machinery.)

Bytes are timestamped as they arrive, in the transport's ``data_received``:
when a batched server sends a token to hundreds of streams at once, the last
stream's token is still timed when it came, not when its coroutine got a turn."""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlsplit

from .metrics import RequestResult

class HttpError(Exception):
    pass


class Endpoint:
    def __init__(self, url: str):
        parts = urlsplit(url if "//" in url else f"http://{url}")
        if parts.scheme != "http":
            raise ValueError(f"only http:// servers can be measured: {url}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.base = f"http://{parts.netloc}"
        self.authority = parts.netloc

    async def connect(self) -> Connection:
        _, reader = await asyncio.get_running_loop().create_connection(_Reader, self.host, self.port)
        return Connection(self, reader)


class _Reader(asyncio.Protocol):
    """Received bytes, each piece with the time it arrived."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.times: list[tuple[int, float]] = []  # (end offset in buf, arrival time)
        self.closed = False
        self.transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.times.append((len(self.buf), time.perf_counter()))
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        if self.closed:
            raise asyncio.IncompleteReadError(bytes(self.buf), None)
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter

    def _take(self, n: int) -> tuple[bytes, float]:
        """The first n bytes, and when the last of them arrived."""
        data = bytes(self.buf[:n])
        arrived = next(t for end, t in self.times if end >= n)
        del self.buf[:n]
        self.times = [(end - n, t) for end, t in self.times if end > n]
        return data, arrived

    async def readline(self) -> bytes:
        while (i := self.buf.find(b"\n")) < 0:
            await self._more()
        return self._take(i + 1)[0]

    async def readexactly(self, n: int) -> tuple[bytes, float]:
        while len(self.buf) < n:
            await self._more()
        return self._take(n)

    async def read(self) -> tuple[bytes, float]:
        """What is there (at least a byte), or b"" once the connection closed."""
        while not self.buf:
            if self.closed:
                return b"", time.perf_counter()
            await self._more()
        return self._take(len(self.buf))


class Connection:
    def __init__(self, endpoint: Endpoint, reader: _Reader):
        self.endpoint = endpoint
        self.reader = reader
        self.reusable = True

    def close(self) -> None:
        if self.reader.transport is not None:
            self.reader.transport.close()

    async def send(self, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, str]]:
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.endpoint.authority}\r\n"
                f"Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n")
        if self.reader.closed:
            raise HttpError("connection closed by the server")
        self.reader.transport.write(head.encode() + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise HttpError("connection closed by the server")
        try:
            status = int(status_line.split()[1])
        except (IndexError, ValueError):
            raise HttpError(f"not an HTTP response: {status_line[:80]!r}") from None
        headers = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("connection", "").lower() == "close":
            self.reusable = False
        return status, headers

    async def body(self, headers: dict[str, str]):
        """The response body, piece by piece: (bytes, when the last of them arrived)."""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    return
                piece = await self.reader.readexactly(size)
                await self.reader.readexactly(2)
                yield piece
        elif "content-length" in headers:
            yield await self.reader.readexactly(int(headers["content-length"]))
        else:
            self.reusable = False
            while (piece := await self.reader.read())[0]:
                yield piece

    async def get_json(self, path: str):
        status, headers = await self.send("GET", path)
        body = b"".join([data async for data, _ in self.body(headers)])
        if status != 200:
            raise HttpError(f"GET {path} -> {status}: {body[:200]!r}")
        return json.loads(body)


async def stream(conn: Connection, path: str, payload: dict, chat: bool, t0: float) -> RequestResult:
    """One streamed completion; times are seconds since ``t0`` (the run's start)."""
    body = json.dumps(payload).encode()
    start = time.perf_counter()
    result = RequestResult(ok=False, start=start - t0)
    try:
        status, headers = await conn.send("POST", path, body)
        pending = b""
        last = 0.0
        done = False
        async for piece, now in conn.body(headers):
            if status != 200:
                pending += piece
                continue
            pending += piece
            *events, pending = pending.replace(b"\r\n", b"\n").split(b"\n\n")
            for event in events:
                for line in event.split(b"\n"):
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        done = True
                        continue
                    chunk = json.loads(data)
                    usage = chunk.get("usage")
                    if usage:
                        result.prompt_tokens = usage.get("prompt_tokens") or 0
                        result.output_tokens = usage.get("completion_tokens") or 0
                    choices = chunk.get("choices") or ()
                    if not choices:
                        continue
                    choice = choices[0]
                    text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
                    if chat and not text:
                        text = (choice.get("delta") or {}).get("reasoning_content")
                    if text:
                        if result.chunks == 0:
                            result.ttft = now - start
                        else:
                            result.itl.append(now - last)
                        last = now
                        result.chunks += 1
        result.latency = time.perf_counter() - start
        if status != 200:
            result.error = f"HTTP {status}: {pending[:200].decode(errors='replace')}"
        elif not done and result.chunks == 0:
            result.error = "the stream ended without a token"
        else:
            result.ok = True
    except (OSError, HttpError, asyncio.IncompleteReadError, ValueError) as e:
        conn.reusable = False
        result.latency = time.perf_counter() - start
        result.error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return result
