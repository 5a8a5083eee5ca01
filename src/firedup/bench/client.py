"""A lean streaming client for OpenAI-compatible servers: HTTP/1.1 over
asyncio streams with keep-alive connections and a small SSE reader, so the
client adds as little as possible to what it measures. (aiohttp, which
``vllm bench serve`` uses, spends most of a small request in its own machinery.)"""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlsplit

from .metrics import RequestResult

READ_TIMEOUT = 600.0


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
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        return Connection(self, reader, writer)


class Connection:
    def __init__(self, endpoint: Endpoint, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.endpoint = endpoint
        self.reader = reader
        self.writer = writer
        self.reusable = True

    def close(self) -> None:
        self.writer.close()

    async def send(self, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, str]]:
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.endpoint.authority}\r\n"
                f"Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
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
        """The response body, piece by piece as it arrives."""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    return
                data = await self.reader.readexactly(size)
                await self.reader.readexactly(2)
                yield data
        elif "content-length" in headers:
            left = int(headers["content-length"])
            while left:
                data = await self.reader.read(min(left, 1 << 16))
                if not data:
                    raise HttpError("connection closed mid-body")
                left -= len(data)
                yield data
        else:
            self.reusable = False
            while data := await self.reader.read(1 << 16):
                yield data

    async def get_json(self, path: str):
        status, headers = await self.send("GET", path)
        body = b"".join([piece async for piece in self.body(headers)])
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
        async for piece in conn.body(headers):
            if status != 200:
                pending += piece
                continue
            now = time.perf_counter()
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
