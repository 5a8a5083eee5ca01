"""A log watched as users watch it: `firedup watch LOG` with no --pid.

The writer of the log is looked for in /proc; when none is found the verdict
comes from the log alone, and a fatal exception followed by silence is failed.
A handled exception that the server survives must not fail it."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

from .conftest import run_cli

ARGS = '[2025-04-09 05:05:13] server_args=ServerArgs(model_path="m", tp_size=1, attention_backend=None)\n'
CUDNN = ('Traceback (most recent call last):\n'
         '  File "/x/launch_server.py", line 1, in <module>\n'
         'RuntimeError: cuDNN version incompatibility: PyTorch was compiled against cuDNN 9.8 '
         'but the system runtime is cuDNN 9.6\n')


def watch(*args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "watch", "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc


def events_until(proc: subprocess.Popen, name: str) -> list[dict]:
    """Events read until one called ``name`` (the watch keeps running)."""
    out = []
    for line in proc.stdout:
        out.append(json.loads(line))
        if out[-1]["event"] == name:
            return out
    raise AssertionError(f"no {name} event: {out}, {proc.stderr.read().decode()}")


def verdict_of(proc: subprocess.Popen) -> tuple[dict, float]:
    """The last event and when it arrived."""
    last = None
    for line in proc.stdout:
        last = json.loads(line)
    at = time.monotonic()
    proc.wait(10)
    return last, at


def test_the_cudnn_traceback_appended_to_a_log_nobody_writes_is_failed_within_3_s(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    proc = watch(str(log), "--server", "sglang")  # the default stall window: 300 s
    writer = events_until(proc, "writer")[-1]
    assert writer["pid"] is None and "log alone" in writer["note"]
    with open(log, "a") as f:
        f.write(CUDNN)
    written = time.monotonic()
    verdict, at = verdict_of(proc)
    assert (verdict["outcome"], verdict["cause"]) == ("failed", "cudnn_version")
    assert verdict["evidence"]["line"].startswith("RuntimeError: cuDNN version incompatibility")
    assert at - written <= 3.0
    assert proc.returncode == 1


def test_the_quiet_period_is_configurable(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS + CUDNN)
    quick = json.loads(run_cli("watch", "--json", "--quiet", "0.2", str(log)).stdout.splitlines()[-1])
    usual = json.loads(run_cli("watch", "--json", str(log)).stdout.splitlines()[-1])
    assert quick["cause"] == usual["cause"] == "cudnn_version"
    assert quick["elapsed"] < 1.5 <= 2.0 <= usual["elapsed"]  # by the watch's own clock


SCRIPT = textwrap.dedent("""
    import sys, time, traceback
    log = open(sys.argv[1], "a", buffering=1)
    print("INFO:     Started server process [1]", file=log)
    print("INFO:     Waiting for application startup.", file=log)
    if sys.argv[2] == "handled":
        try:
            import no_such_optional_kernel
        except ImportError:
            log.write("ERROR:    optional kernel missing, falling back\\n" + traceback.format_exc())
        print("INFO:     using the slow path", file=log)
        time.sleep(3)  # silent longer than the quiet period: still going
        print("INFO:     Uvicorn running on http://127.0.0.1:1 (Press CTRL+C to quit)", file=log)
        time.sleep(30)
    else:
        time.sleep(0.5)
        log.write("Traceback (most recent call last):\\n  File \\"serve.py\\", line 3, in <module>\\n"
                  "OSError: /models/m does not appear to have a file named config.json\\n")
        log.flush()
        time.sleep(float(sys.argv[3]))
        sys.exit(1)
""")


def start_writer(tmp_path, *args: str) -> tuple[subprocess.Popen, str]:
    log = tmp_path / "server.log"
    log.write_text("")
    script = tmp_path / "serve.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, str(script), str(log), *args]), str(log)


def test_the_writer_is_found_and_its_exit_decides(tmp_path):
    server, log = start_writer(tmp_path, "dies", "5")  # lingers 5 s after its traceback, then exits
    try:
        proc = watch(log)
        writer = events_until(proc, "writer")[-1]
        if writer["pid"] is None:  # looked for before the server opened its log: looked for again at its first bytes
            writer = events_until(proc, "writer")[-1]
        assert writer["pid"] == server.pid and "serve.py" in writer["command"]
        verdict, at = verdict_of(proc)
    finally:
        server.kill()
        server.wait()
    assert (verdict["outcome"], verdict["cause"]) == ("failed", "model_not_found")
    assert verdict["exit_code"] is not None  # decided by the exit, not the quiet period


def test_a_handled_traceback_the_server_survives_is_ready_not_failed(tmp_path):
    server, log = start_writer(tmp_path, "handled")
    try:
        verdict, _ = verdict_of(watch(log, "--stall", "20"))
    finally:
        server.kill()
        server.wait()
    assert verdict["outcome"] == "ready", verdict


def test_a_handled_traceback_is_not_failed_when_the_log_is_watched_alone(tmp_path):
    """The same server, its log copied line by line into a file nobody holds open."""
    server, source = start_writer(tmp_path, "handled")
    copy = tmp_path / "copy.log"
    copy.write_text("")
    proc = watch(str(copy), "--stall", "20")
    assert events_until(proc, "writer")[-1]["pid"] is None
    done = 0
    try:
        while proc.poll() is None:
            data = open(source, "rb").read()
            if len(data) > done:
                with open(copy, "ab") as f:
                    f.write(data[done:])
                done = len(data)
            time.sleep(0.05)
        verdict = json.loads(proc.stdout.read().splitlines()[-1])
    finally:
        server.kill()
        server.wait()
    assert verdict["outcome"] == "ready", verdict


def test_a_server_started_after_the_watch_on_an_existing_log_is_found_as_its_writer(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")  # left from an earlier run, or touched before the start
    proc = watch(str(log))
    assert events_until(proc, "writer")[-1]["pid"] is None
    with open(log, "wb") as out:  # "> log": the server truncates it and writes
        server = subprocess.Popen([sys.executable, "-c", "import time; print('starting', flush=True); "
                                   "time.sleep(1.5); raise SystemExit(3)"], stdout=out)
    try:
        writer = events_until(proc, "writer")[-1]
        verdict, _ = verdict_of(proc)
    finally:
        server.kill()
        server.wait()
    assert writer["pid"] == server.pid
    assert verdict["outcome"] == "failed" and verdict["exit_code"] is not None


def test_a_log_that_never_appears_says_so(tmp_path):
    log = tmp_path / "no" / "such.log"
    proc = run_cli("watch", "--json", "--stall", "1", str(log))
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {"t": 0.0, "event": "waiting", "log": str(log)} in events  # said at once, not only at the verdict
    assert events[-1]["outcome"] == "stalled" and "never appeared" in events[-1]["notes"][0]
    # nothing was read: the explanation is about the path, not a server's imports or locks
    assert events[-1]["explanation"].startswith("No log appeared at the path watched"), events[-1]
    assert "py-spy" not in events[-1]["remedy"]
    plain = run_cli("watch", "--stall", "1", str(log)).stdout.decode()
    assert f"waiting: {log} does not exist yet" in plain and "None" not in plain
    # a log that is there is followed at once, with no such word
    log.parent.mkdir()
    log.write_text("INFO 10-12 00:26:50 api_server.py:528] vLLM API server version 0.6.3\n")
    assert "waiting" not in run_cli("watch", "--stall", "1", str(log)).stdout.decode()


LISTENER = textwrap.dedent("""
    import socket, sys, time
    host, port = sys.argv[sys.argv.index("--host") + 1], int(sys.argv[sys.argv.index("--port") + 1])
    s = socket.socket()
    s.bind((host, port))
    s.listen()
    print(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)", flush=True)
    while True:
        conn, _ = s.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
        conn.close()
""")


def test_a_port_held_on_another_address_does_not_block_the_launch(tmp_path):
    script = tmp_path / "serve.py"
    script.write_text(LISTENER)
    with socket.socket() as other:
        other.bind(("127.0.0.2", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = run_cli("launch", "--json", "--name", "beside", "--stall", "20", "--",
                       sys.executable, str(script), "--host", "127.0.0.1", "--port", str(port))
        verdict = json.loads(proc.stdout.splitlines()[-1])
        held = run_cli("launch", "--json", "--name", "same", "--", sys.executable, str(script),
                       "--host", "127.0.0.1", "--port", str(port))
    run_cli("stop", "beside")
    assert verdict["outcome"] == "ready", verdict
    taken = json.loads(held.stdout.splitlines()[-1])
    assert taken["cause"] == "port_in_use" and "beside" in taken["evidence"]["line"]


HEALTHY = textwrap.dedent("""
    import http.server, sys
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
        def log_message(self, *args):
            print('INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK', flush=True)
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Health)
    print(f"INFO:     Uvicorn running on http://127.0.0.1:{httpd.server_port} (Press CTRL+C to quit)", flush=True)
    httpd.serve_forever()
""")


def watched_beside_a_shell(tmp_path, shell: str, served: str, *args: str) -> dict:
    """The verdict of ``watch server.log --url`` on the port the HEALTHY server
    writes into ``served``, while ``shell`` runs in a session of its own."""
    (tmp_path / "healthy.py").write_text(HEALTHY)
    pipeline = subprocess.Popen(["sh", "-c", shell], cwd=tmp_path, env={**os.environ, "PY": sys.executable},
                                start_new_session=True)
    try:
        out, deadline = tmp_path / served, time.monotonic() + 10
        while "running on" not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        port = out.read_text().split("127.0.0.1:")[1].split(" ")[0]
        verdict, _ = verdict_of(watch(str(tmp_path / "server.log"), "--url", f"http://127.0.0.1:{port}", *args))
    finally:
        os.killpg(pipeline.pid, signal.SIGKILL)
        pipeline.wait()
    return verdict


def test_a_server_piped_into_tee_is_the_writers_own_and_its_health_answer_counts(tmp_path):
    # "server | tee log": tee writes the log, the server (outside tee's tree, writing
    # into its input) holds the port; before, the answer was another's and the watch
    # never ended (its own probe lines in the log counted as progress)
    verdict = watched_beside_a_shell(tmp_path, '"$PY" healthy.py | tee server.log > /dev/null', "server.log",
                                     "--stall", "15", "--timeout", "20")
    assert verdict["outcome"] == "ready", verdict


def test_a_server_beside_the_pipeline_in_the_same_script_is_not_the_one_piped_into_tee(tmp_path):
    # one script (no job control: one process group) started an old server, then a new one piped
    # into tee that is still loading: the old server's answer is not the log's server's
    (tmp_path / "loading.py").write_text("import time\nfor i in range(60):\n"
                                         "    print(f'Loading weights {i}/60', flush=True)\n    time.sleep(0.5)\n")
    shell = '"$PY" healthy.py > old.log & "$PY" loading.py | tee server.log > /dev/null'
    verdict = watched_beside_a_shell(tmp_path, shell, "old.log", "--stall", "15", "--timeout", "6")
    assert verdict["outcome"] == "timeout", verdict


def test_a_deadline_that_passed_without_a_verdict_does_not_make_the_watch_spin(tmp_path, monkeypatch):
    from firedup.watch import POLL, Watch

    w = Watch(log=str(tmp_path / "server.log"))
    monkeypatch.setattr(w.judge, "next_deadline", lambda: 5.0)  # a ready not yet confirmed, long past
    assert w._sleep(100.0) == POLL
