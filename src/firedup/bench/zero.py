"""A zero-work streaming server on loopback: answers /health and /v1/models
and streams ``max_tokens`` chunks for completions and chat completions, at
once or paced like a decoding server, so a benchmark against it measures the
client alone (``firedup bench --calibrate``, benchmarks/client.py).

    python -m firedup.bench.zero [PACE_MS] [--log FILE] [--port PORT]

prints its port. With ``--log``, each request is written to FILE as a JSON
line with its response id, when its last byte reached the server's socket
(the kernel's stamp) and when the server wrote its first and last token, on
the perf_counter clock (the system-wide CLOCK_MONOTONIC on Linux, so a client
on the same machine can compare): the server's side of each request's latency."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import time
from typing import IO

from .client import enable_timestamps, receive

MODELS = json.dumps({"object": "list", "data": [{"id": "zero", "object": "model"}]}).encode()
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _token(request_id: bytes, chat: bool) -> bytes:
    if chat:
        return _chunked(b'data: {"id":"%s","object":"chat.completion.chunk","model":"zero",'
                        b'"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n' % request_id)
    return _chunked(b'data: {"id":"%s","object":"text_completion","model":"zero",'
                    b'"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n' % request_id)


class _Stream:
    """A paced response: the ticker writes its tokens."""

    def __init__(self, conn: _Connection, request_id: bytes, token: bytes, left: int, tail: bytes, received: float):
        self.conn, self.id, self.token, self.left, self.tail = conn, request_id, token, left, tail
        self.received = received
        self.first_sent = 0.0


class _Connection:
    def __init__(self, server: ZeroServer, sock: socket.socket):
        self.server = server
        self.sock = sock
        self.buf = bytearray()
        self.out = bytearray()  # what the socket did not take yet
        self.closed = False
        enable_timestamps(sock)
        server.loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        received = receive(self.sock)
        if received is None:
            return
        data, arrived, _ = received
        if not data:
            self.close()
            return
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buf[:end])
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4:end + 4 + length])
            del self.buf[:end + 4 + length]
            self.server.request(self, head, body, arrived)

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self.out:
            self.out += data
            return
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close()
            return
        if sent < len(data):
            self.out += data[sent:]
            self.server.loop.add_writer(self.sock.fileno(), self._writable)

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        del self.out[:sent]
        if not self.out:
            self.server.loop.remove_writer(self.sock.fileno())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.server.loop.remove_reader(self.sock.fileno())
            self.server.loop.remove_writer(self.sock.fileno())
            self.sock.close()


class ZeroServer:
    def __init__(self, pace: float = 0.0, log: IO[str] | None = None, port: int = 0):
        self.pace = pace  # seconds between tokens (0: all at once)
        self.log = log
        self.loop = asyncio.get_running_loop()
        self._ids = itertools.count()
        self._streams: list[_Stream] = []
        self._ticking = False
        self.listener = socket.create_server(("127.0.0.1", port), backlog=1024)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.loop.add_reader(self.listener.fileno(), self._accept)

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _Connection(self, sock)

    def request(self, conn: _Connection, head: bytes, body: bytes, received: float) -> None:
        if head.startswith(b"GET /v1/models"):
            conn.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                       % (len(MODELS), MODELS))
            return
        if head.startswith(b"GET /health"):
            conn.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            return
        if not head.startswith((b"POST /v1/completions", b"POST /v1/chat/completions")):
            conn.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        request = json.loads(body or b"{}")
        request_id = b"cmpl-%d" % next(self._ids)
        token = _token(request_id, chat=head.startswith(b"POST /v1/chat/"))
        n = int(request.get("max_completion_tokens") or request.get("max_tokens") or 16)
        # as vLLM ends a stream: the finish_reason on the last choice, then the usage, then [DONE]
        finish = json.dumps({"id": request_id.decode(), "choices": [{"index": 0, "text": "", "delta": {},
                                                                      "finish_reason": "length"}]}).encode()
        usage = json.dumps({"id": request_id.decode(), "choices": [],
                            "usage": {"prompt_tokens": len(request.get("prompt", "").split()),
                                      "completion_tokens": n}}).encode()
        tail = _chunked(b"data: " + finish + b"\n\ndata: " + usage + b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n"
        if self.pace:
            conn.write(HEAD)
            self._streams.append(_Stream(conn, request_id, token, n, tail, received))
            if not self._ticking:
                self._ticking = True
                self.loop.call_at(self.loop.time() + self.pace, self._tick, self.loop.time() + self.pace)
            return
        sent = time.perf_counter()
        conn.write(HEAD + token * n + tail)
        self._record(request_id, received, sent, sent)

    def _tick(self, due: float) -> None:
        """One callback writes a token to every paced stream each tick: exact
        pacing for hundreds of streams without hundreds of timers."""
        for stream in list(self._streams):
            if stream.conn.closed:
                self._streams.remove(stream)
                continue
            sent = time.perf_counter()
            stream.first_sent = stream.first_sent or sent
            stream.conn.write(stream.token)
            stream.left -= 1
            if not stream.left:
                stream.conn.write(stream.tail)
                self._streams.remove(stream)
                self._record(stream.id, stream.received, stream.first_sent, sent)
        self.loop.call_at(due + self.pace, self._tick, due + self.pace)

    def _record(self, request_id: bytes, received: float, first_sent: float, last_sent: float) -> None:
        if self.log is not None:
            self.log.write(json.dumps({"id": request_id.decode(), "received": received, "first_sent": first_sent,
                                       "last_sent": last_sent}) + "\n")


async def _main() -> None:
    ap = argparse.ArgumentParser(prog="python -m firedup.bench.zero")
    ap.add_argument("pace_ms", nargs="?", type=float, default=0.0, help="milliseconds between tokens (0: all at once)")
    ap.add_argument("--log", help="write each request's server-side times to this file")
    ap.add_argument("--port", type=int, default=0, help="listen on this port, as a launched server does (default: any)")
    args = ap.parse_args()
    log = open(args.log, "a", buffering=1) if args.log else None
    server = ZeroServer(args.pace_ms / 1000, log, args.port)
    print(server.port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
