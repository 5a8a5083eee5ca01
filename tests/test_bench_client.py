"""The benchmark client: bytes timed when they reached the socket, each request
matched to the server's own record of it, bad responses ending as errors."""

import asyncio
import http.server
import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from firedup.bench import client
from firedup.bench.prompts import CALIBRATION_REQUESTS
from firedup.bench.run import calibrate, run
from firedup.bench.workload import Workload

from .conftest import assert_measured, run_cli

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def _token(text: str = "a", finish: str | None = None) -> bytes:
    reason = b"null" if finish is None else b'"%s"' % finish.encode()
    return _chunk(b'data: {"id":"cmpl-1","choices":[{"index":0,"text":"%s","finish_reason":%s}]}\n\n'
                  % (text.encode(), reason))


FINISH = _token("", "length")  # a stream's last choice, as vLLM and llama.cpp end one


def _serve_once(respond) -> int:
    """A server on loopback for one request: reads it, then ``respond(sock)``."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        sock, _ = listener.accept()
        with sock:
            request = b""
            while b"\r\n\r\n" not in request:
                request += sock.recv(65536)
            respond(sock)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def _stream_from(port: int, busy: tuple[float, float] | None = None, endpoint: client.Endpoint | None = None):
    """One streamed completion; ``busy``: (after, for how long) the client's event loop is blocked."""
    async def go():
        conn = await (endpoint or client.Endpoint(f"http://127.0.0.1:{port}")).connect()
        if busy:
            asyncio.get_running_loop().call_later(busy[0], time.sleep, busy[1])
        try:
            return await asyncio.wait_for(
                client.stream(conn, "/v1/completions", {"prompt": "x"}, False, time.perf_counter()), 10)
        finally:
            conn.close()
    return asyncio.run(go())


@pytest.mark.skipif(client._TIMESTAMPNS is None, reason="kernel receive stamps: Linux on x86-64 or arm64")
def test_a_token_is_timed_when_it_reached_the_socket_not_when_the_busy_client_read_it():
    def respond(sock):
        time.sleep(0.05)
        sock.sendall(HEAD + _token())  # arrives while the client is busy (20 to 320 ms)
        time.sleep(0.35)
        sock.sendall(_token() + FINISH + _chunk(b"data: [DONE]\n\n") + END)

    port = _serve_once(respond)
    endpoint = client.Endpoint(f"http://127.0.0.1:{port}")
    result = _stream_from(port, busy=(0.02, 0.3), endpoint=endpoint)
    assert result.ok and result.chunks == 2
    assert 0.04 < result.ttft < 0.15  # read at about 320 ms
    assert 0.3 < result.itl[0] < 0.45
    assert max(endpoint.read_lag) > 0.2  # and how late it was read is kept


@contextmanager
def _zero_server(*args: str) -> Iterator[str]:
    """firedup's zero-work server (``python -m firedup.bench.zero ARGS``): its URL."""
    server = subprocess.Popen([sys.executable, "-m", "firedup.bench.zero", *args], stdout=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{server.stdout.readline().strip()}"
    finally:
        server.kill()
        server.wait()


def test_each_request_is_matched_to_the_servers_record_and_contains_it(tmp_path):
    log = tmp_path / "server.jsonl"
    with _zero_server("5", "--log", str(log)) as url:
        result = run(url, Workload(concurrency=32, num_prompts=128, input_len=8, output_len=8, warmup=0))
    record = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        record[entry["id"]] = entry
    # and the server saw nothing else but the requests that measured its tokens a word
    assert set(r["id"] for r in result.requests) <= set(record)
    assert len(record) == len(result.requests) + CALIBRATION_REQUESTS
    # the kernel's stamp is carried from the wall clock to the monotonic one; on a
    # loaded machine a preemption between reading the two clocks shifts it by ~0.1 ms
    slack = 200e-6
    for r in result.requests:
        server_side = record[r["id"]]
        assert r["ok"] and r["output_tokens"] == r["chunks"] == 8
        assert r["ttft"] + slack >= server_side["first_sent"] - server_side["received"]
        assert r["latency"] + slack >= server_side["last_sent"] - server_side["received"]


def test_an_infinite_request_rate_sends_every_request_at_once_as_vllm_bench_serve_does():
    with _zero_server("5") as url:  # 5 ms a token: a request takes 40 ms
        result = run(url, Workload(request_rate=math.inf, num_prompts=16, input_len=8, output_len=8, warmup=0))
    assert result.metrics["completed"] == 16
    assert max(r["start"] for r in result.requests) < min(r["start"] + r["latency"] for r in result.requests)
    assert "target_rate" not in result.health  # no arrivals drawn, so no rate to fall short of
    # as vllm bench serve writes it, and the JSON printed and recorded stays JSON
    assert result.workload["request_rate"] == result.metrics["request_rate"] == "inf"
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.parametrize("response, error", [
    (b"garbage\r\n\r\n", "not an HTTP response"),
    (HEAD + b"zz\r\n", "malformed response"),
    (HEAD + _chunk(b"data: [1, 2]\n\n"), "malformed response"),
    (HEAD + _token(), "connection closed by the server"),
    (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", "HTTP 500: oops"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "the stream ended without a token"),
    # llama-cpp-python cuts a running stream when another request arrives: [DONE] after a choice with no finish_reason
    (HEAD + _token() + _chunk(b"data: [DONE]\n\n") + END,
     "the server ended the stream with no finish_reason after 1 token(s): cut off, not finished"),
    (HEAD + _token() + _token() + END, "with no finish_reason after 2 token(s)"),
    (HEAD + _token() + _token("", "abort") + _chunk(b"data: [DONE]\n\n") + END, "with finish_reason 'abort'"),
])
def test_a_bad_response_ends_the_request_with_an_error_not_a_hang(response, error):
    result = _stream_from(_serve_once(lambda sock: sock.sendall(response)))
    assert not result.ok and error in result.error


def test_chat_completions_are_streamed_and_counted():
    result = calibrate(Workload(concurrency=4, num_prompts=20, input_len=8, output_len=8, warmup=1, chat=True))
    assert result.metrics["completed"] == 20 and result.metrics["total_output_tokens"] == 160
    assert all(r["chunks"] == 8 and r["id"].startswith("cmpl-") for r in result.requests)


def test_without_usage_the_chunks_are_counted_and_said_to_be():
    def respond(sock):
        sock.sendall(HEAD + _token() + _token() + _token("") + _token("", "stop") + _chunk(b"data: [DONE]\n\n")
                     + END)

    result = _stream_from(_serve_once(respond))
    assert result.ok and not result.usage and result.output_tokens == result.chunks == 2
    with_usage = _stream_from(_serve_once(lambda sock: sock.sendall(
        HEAD + _token("a", "length")
        + _chunk(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}\n\n') + END)))
    assert with_usage.usage and (with_usage.prompt_tokens, with_usage.output_tokens, with_usage.chunks) == (3, 5, 1)


class _ServesModelM(http.server.BaseHTTPRequestHandler):
    """Streamed completions of model "m", refused as vLLM refuses a model it does not serve, or a prompt
    saying "refuse": HTTP 400 with an indented JSON error; no other endpoint."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/completions":
            self.do_GET()
        elif body["model"] != "m" or "refuse" in body["prompt"]:
            error = json.dumps({"object": "error", "message": f"The model `{body['model']}` does not exist."},
                               indent=1).encode()
            self.wfile.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error))
        else:
            usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}\n\n'
            self.wfile.write(HEAD + _token() + _token() + FINISH + _chunk(usage) + _chunk(b"data: [DONE]\n\n") + END)

    def do_GET(self):
        self.wfile.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    def log_message(self, *args):
        pass


@contextmanager
def _serving_model_m() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ServesModelM)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _ServesWithoutUsage(_ServesModelM):
    """llama-cpp-python's server: streamed tokens and no usage."""

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.wfile.write(HEAD + _token() + _token("a", "length") + _chunk(b"data: [DONE]\n\n") + END)


class _CutsStreams(_ServesModelM):
    """llama-cpp-python at a concurrency over 1: a request whose prompt says "cut" has its stream ended after
    one token, with [DONE] and no finish_reason."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        end = _token() if "cut" in body["prompt"] else _token() + _token("a", "length")
        self.wfile.write(HEAD + end + _chunk(b"data: [DONE]\n\n") + END)


def test_a_stream_the_server_cut_off_is_a_failed_request_not_an_early_stop(tmp_path):
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text('{"prompt": "say hi", "output_len": 2}\n{"prompt": "cut this", "output_len": 2}\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CutsStreams)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = run_cli("bench", f"http://127.0.0.1:{server.server_address[1]}", "--model", "m", "--dataset",
                       str(dataset), "--num-prompts", "4", "--warmup", "0", "--json")
    finally:
        server.shutdown()
        server.server_close()
    assert_measured(proc)
    out = json.loads(proc.stdout)
    assert (out["completed"], out["failed"], out["total_output_tokens"]) == (2, 2, 4)
    assert "2 of 4 requests failed; the first: the server ended the stream with no finish_reason" in " ".join(
        out["warnings"])
    assert not any("stopped before the tokens asked" in w for w in out["warnings"])


class _BehindAGateway(_ServesModelM):
    """An OpenAI API at /team-a/v1 (a gateway's prefix); nothing at /v1."""

    def do_POST(self):
        if not self.path.startswith("/team-a/"):
            self.rfile.read(int(self.headers["Content-Length"]))
            return self.do_GET()
        self.path = self.path.removeprefix("/team-a")
        super().do_POST()

    def do_GET(self):
        if self.path != "/team-a/v1/models":
            return super().do_GET()
        body = b'{"data": [{"id": "m"}]}'
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


@pytest.mark.parametrize("path", ["/team-a", "/team-a/", "/team-a/v1", "/team-a/v1/"])
def test_a_url_with_a_path_is_the_apis_base_behind_a_gateway(tmp_path, path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BehindAGateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        proc = run_cli("bench", base + path, "--num-prompts", "2", "--input-len", "4", "--output-len", "2",
                       "--warmup", "0", "--json")
        dropped = run_cli("bench", base + "/nope/deeper", "--num-prompts", "2", "--input-len", "4", "--warmup", "0")
    finally:
        server.shutdown()
        server.server_close()
    assert_measured(proc)
    out = json.loads(proc.stdout)
    assert (out["url"], out["model"], out["completed"]) == (base + "/team-a", "m", 2)
    # a path the server does not serve is not quietly replaced by the root
    assert dropped.returncode == 2 and "GET /nope/deeper/v1/models -> 404" in dropped.stderr.decode()


@pytest.mark.parametrize("url, said", [
    ("http://127.0.0.1:1/v1/completions", "bench takes the server's base URL (http://host:port, or http://host/prefix "
                                          "behind a gateway), not an endpoint's: http://127.0.0.1:1/v1/completions"),
    ("http://127.0.0.1:1/x?y=1", "not an endpoint's"),
    ("ftp://x", "only http:// servers can be measured: ftp://x"),
    ("https://127.0.0.1:1", "only http:// servers can be measured"),
])
def test_a_url_bench_cannot_measure_is_refused_in_one_line(url, said):
    proc = run_cli("bench", url, "--num-prompts", "1")
    assert proc.returncode == 2 and proc.stderr.decode().startswith("firedup: ") and said in proc.stderr.decode()
    assert proc.stderr.decode().count("\n") == 1


def test_a_server_that_sends_no_usage_has_the_input_lengths_asked_for():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ServesWithoutUsage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = run_cli("bench", f"http://127.0.0.1:{server.server_address[1]}", "--model", "m", "--num-prompts", "3",
                       "--input-len", "16", "--output-len", "2", "--json")
    finally:
        server.shutdown()
        server.server_close()
    measured = json.loads(proc.stdout)
    assert (measured["total_input_tokens"], measured["total_output_tokens"]) == (48, 6)


def test_a_bench_whose_every_request_failed_says_why_in_one_line_and_records_nothing():
    with _serving_model_m() as url:
        proc = run_cli("bench", url, "--model", "no-such-model", "--num-prompts", "3", "--input-len", "4")
    assert proc.returncode == 1 and not proc.stdout
    assert proc.stderr.decode() == ("firedup: all 3 requests failed, so nothing was measured; the first: HTTP 400: "
                                    '{ "object": "error", "message": "The model `no-such-model` does not exist." }\n')
    assert json.loads(run_cli("runs", "--json").stdout) == []


def test_a_bench_where_some_requests_failed_counts_them_and_gives_the_first_error(tmp_path):
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text('{"prompt": "say hi", "output_len": 2}\n{"prompt": "refuse this", "output_len": 2}\n')
    with _serving_model_m() as url:
        proc = run_cli("bench", url, "--model", "m", "--dataset", str(dataset), "--num-prompts", "2", "--warmup", "0",
                       "--json")
    assert_measured(proc)
    out = json.loads(proc.stdout)
    assert (out["completed"], out["failed"]) == (1, 1)
    assert "1 of 2 requests failed; the first: HTTP 400: { \"object\": \"error\"" in " ".join(out["warnings"])


def test_a_server_that_never_accepts_is_not_waited_on_for_minutes(monkeypatch):
    monkeypatch.setattr(client, "CONNECT_TIMEOUT", 0.5)
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    queued = []
    for _ in range(3):  # fill the accept queue: the kernel then drops further handshakes
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        queued.append(sock)
    time.sleep(0.1)

    async def connect():
        await client.Endpoint(f"http://127.0.0.1:{port}").connect()

    with pytest.raises(OSError, match="no answer from 127.0.0.1"):
        asyncio.run(connect())
    for sock in queued + [listener]:
        sock.close()


def _silent_server() -> tuple[socket.socket, list[socket.socket]]:
    """A server that accepts connections and reads requests, and never answers: (listener, accepted)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    return listener, accepted


@pytest.mark.parametrize("model, asked", [(None, "GET /v1/models"), ("m", "POST /tokenize")])
def test_a_server_that_accepts_and_never_answers_is_not_waited_on_for_ever(monkeypatch, model, asked):
    monkeypatch.setattr(client, "ANSWER_TIMEOUT", 0.5)
    listener, accepted = _silent_server()
    started = time.monotonic()
    try:
        with pytest.raises(client.HttpError, match=f"no answer to {asked} for 0.5 s"):
            run(f"http://127.0.0.1:{listener.getsockname()[1]}", Workload(num_prompts=1, warmup=0), model=model)
    finally:
        for sock in accepted + [listener]:
            sock.close()
    assert time.monotonic() - started < 5  # one wait, not one a tokenize endpoint tried


def test_a_stream_that_goes_silent_fails_after_the_idle_time(monkeypatch):
    monkeypatch.setattr(client, "STREAM_IDLE_TIMEOUT", 0.5)
    result = _stream_from(_serve_once(lambda sock: (sock.sendall(HEAD + _token()), time.sleep(3))))
    assert not result.ok and result.error == "NoAnswer: no answer to POST /v1/completions for 0.5 s"
    assert result.chunks == 1 and result.latency < 2


def test_a_stream_queued_behind_another_that_streams_is_waited_for(monkeypatch):
    """A server schedules a request only when one before it ends, and sends it
    nothing until then: silent on its own connection, never on the server's."""
    monkeypatch.setattr(client, "STREAM_IDLE_TIMEOUT", 0.5)
    listener = socket.create_server(("127.0.0.1", 0))
    first_done = threading.Event()

    def serve() -> None:
        def answer(sock: socket.socket, running: bool) -> None:
            with sock:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += sock.recv(65536)
                if running:
                    sock.sendall(HEAD)
                    for _ in range(8):  # 1.6 s of tokens, every 0.2 s
                        sock.sendall(_token())
                        time.sleep(0.2)
                    sock.sendall(FINISH + END)
                    first_done.set()
                else:
                    first_done.wait()  # queued: nothing until the first ends
                    sock.sendall(HEAD + _token() + FINISH + END)
        running = True
        for _ in range(2):
            sock, _ = listener.accept()
            threading.Thread(target=answer, args=(sock, running), daemon=True).start()
            running = False

    threading.Thread(target=serve, daemon=True).start()

    async def both():
        endpoint = client.Endpoint(f"http://127.0.0.1:{listener.getsockname()[1]}")
        conns = [await endpoint.connect(), None]
        first = asyncio.create_task(client.stream(conns[0], "/v1/completions", {"prompt": "x"}, False,
                                                  time.perf_counter()))
        await asyncio.sleep(0.1)
        conns[1] = await endpoint.connect()
        second = await client.stream(conns[1], "/v1/completions", {"prompt": "x"}, False, time.perf_counter())
        results = [await first, second]
        for conn in conns:
            conn.close()
        return results

    results = asyncio.run(both())
    listener.close()
    assert all(r.ok for r in results), [r.error for r in results]
    assert results[1].ttft > 1.0  # silent on its own connection for three idle times


def test_an_error_answer_to_v1_models_is_quoted_as_text():
    body = b'{"error": {"message": "Loading model", "code": 503}}'
    port = _serve_once(lambda sock: sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s"
                                                 % (len(body), body)))
    with pytest.raises(client.HttpError) as raised:
        run(f"http://127.0.0.1:{port}", Workload(num_prompts=1, warmup=0))
    assert str(raised.value) == ('GET /v1/models -> 503: {"error": {"message": "Loading model", "code": 503}}: '
                                 "pass --model NAME")


def test_an_api_key_goes_as_a_bearer_token_and_is_not_recorded(tmp_path, monkeypatch):
    listener = socket.create_server(("127.0.0.1", 0))
    heads = []

    def serve() -> None:
        sock, _ = listener.accept()
        with sock:
            while True:
                request = b""
                while b"\r\n\r\n" not in request:
                    data = sock.recv(65536)
                    if not data:
                        return
                    request += data
                heads.append(request.split(b"\r\n\r\n")[0])
                sock.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 12\r\n\r\nUnauthorized")

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-test")
    proc = run_cli("bench", f"http://127.0.0.1:{listener.getsockname()[1]}", "--num-prompts", "1", "--warmup", "0")
    assert proc.returncode == 2 and "401" in proc.stderr.decode()  # /v1/models refused: a clear one-line error
    assert heads and all(b"\r\nAuthorization: Bearer sk-secret-test" in head for head in heads)
    recorded = run_cli("bench", "--calibrate", "--num-prompts", "4", "--output-len", "4", "--input-len", "4")
    assert recorded.returncode in (0, 1)  # 1: the zero-work server makes the client the bottleneck
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("ledger.db*"))
    assert b"firedup" in stored and b"sk-secret-test" not in stored


def test_a_refused_connection_says_nothing_is_listening_at_the_url():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_cli("bench", "--num-prompts", "1", f"http://127.0.0.1:{port}")
    assert proc.returncode == 2
    assert proc.stderr.decode() == f"firedup: nothing is listening at http://127.0.0.1:{port}\n"
