"""A zero-work streaming server on loopback: answers /v1/models and streams
``max_tokens`` chunks for completions, at once or paced like a decoding server,
so a benchmark against it measures the client alone (``firedup bench
--calibrate``, benchmarks/client.py). ``python -m firedup.bench.zero [PACE_MS]``
prints its port."""

from __future__ import annotations

import asyncio
import json
import sys

CHUNK = b'data: {"id":"x","object":"text_completion","model":"zero","choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n'
MODELS = json.dumps({"object": "list", "data": [{"id": "zero", "object": "model"}]}).encode()


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pace: float = 0.0) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length) if length else b""
            if head.startswith(b"GET /v1/models"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(MODELS), MODELS))
                continue
            request = json.loads(body or b"{}")
            n = int(request.get("max_tokens") or 16)
            usage = json.dumps({"choices": [], "usage": {"prompt_tokens": len(request.get("prompt", "").split()),
                                                         "completion_tokens": n}}).encode()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            tail = _chunked(b"data: " + usage + b"\n\ndata: [DONE]\n\n") + b"0\r\n\r\n"
            if not pace:
                writer.write(head + _chunked(CHUNK * n) + tail)
            else:  # one token every `pace` seconds, like a server decoding
                writer.write(head)
                finished = asyncio.get_running_loop().create_future()
                _streams.append([writer, n, tail, finished])
                _ticker(pace)
                await finished
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


_streams: list[list] = []  # paced streams: [writer, tokens left, tail, future]
_ticking: list[asyncio.Task] = []


def _ticker(pace: float) -> None:
    """One task writes a token to every paced stream each tick: exact pacing
    for hundreds of streams without hundreds of timers."""
    if _ticking:
        return

    async def tick() -> None:
        next_at = asyncio.get_running_loop().time()
        while True:
            next_at += pace
            await asyncio.sleep(max(0.0, next_at - asyncio.get_running_loop().time()))
            for stream in list(_streams):
                writer, left, tail, finished = stream
                writer.write(_chunked(CHUNK))
                stream[1] = left - 1
                if left == 1:
                    writer.write(tail)
                    _streams.remove(stream)
                    finished.set_result(None)

    _ticking.append(asyncio.get_running_loop().create_task(tick()))


async def serve(port: int = 0, pace: float = 0.0) -> asyncio.base_events.Server:
    """``pace``: seconds between tokens (0: all at once)."""
    return await asyncio.start_server(lambda r, w: _handle(r, w, pace), "127.0.0.1", port, backlog=1024)


async def _main() -> None:
    pace = float(sys.argv[1]) / 1000 if len(sys.argv) > 1 else 0.0
    server = await serve(pace=pace)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main())
