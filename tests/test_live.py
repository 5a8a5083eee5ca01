"""watch and launch on real processes and files (small scripts standing in for
servers; the real servers are in test_servers.py)."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil
import pytest
from rich.console import Console

import firedup
from firedup import _servers, cli, registry, rules
from firedup._launch import derive_url, start_and_watch
from firedup.sinks.live import LiveView, PlainView
from firedup.sources.file import FileFollower
from firedup.sources.pgroup import group_alive
from firedup.watch import Watch, py_spy

from .conftest import FIXTURES, run_cli

READY = "[2025-04-09 05:05:21] The server is fired up and ready to roll!"
ARGS = "[2025-04-09 05:05:03] server_args=ServerArgs(model_path='m', attention_backend='triton')"


def script(tmp_path, body: str) -> list[str]:
    path = tmp_path / "server.py"
    path.write_text("import os, sys, time\n" + body)
    return [sys.executable, "-u", str(path)]


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


# -- the file follower ------------------------------------------------------

def _read_all(f: FileFollower) -> bytes:
    return b"".join(iter(f.read, b""))


def test_follower_waits_for_the_file_and_follows_rotation_and_truncation(tmp_path):
    path = tmp_path / "server.log"
    f = FileFollower(path)
    assert f.read() == b""
    path.write_bytes(b"one\ntwo\n")
    assert f.read() == b"one\ntwo\n"
    with open(path, "ab") as w:
        w.write(b"three\n")
    os.rename(path, tmp_path / "server.log.1")  # rotation: the old file keeps its last lines
    with open(tmp_path / "server.log.1", "ab") as w:
        w.write(b"four\n")
    path.write_bytes(b"five\n")
    assert f.read() == b"three\nfour\n"  # the old file to its end first
    assert f.read() == b"five\n"
    path.write_bytes(b"")  # truncation in place
    with open(path, "ab") as w:
        w.write(b"six\n")
    assert f.read() == b"six\n"
    assert f.read() == b""


def test_follower_reads_a_huge_file_a_chunk_at_a_time(tmp_path):
    path = tmp_path / "server.log"
    with open(path, "wb") as w:
        w.write(b"line\n" * 10)
        w.truncate(3 * FileFollower.CHUNK)  # a hole: gigabytes of NULs, read in pieces, not held whole
    f = FileFollower(path)
    sizes = [len(chunk) for chunk in iter(f.read, b"")]
    assert sizes == [FileFollower.CHUNK] * 3
    assert _read_all(FileFollower(path))[:10] == b"line\nline\n"


def test_follower_starts_at_an_offset(tmp_path):
    path = tmp_path / "server.log"
    path.write_bytes(b"old run\n")
    f = FileFollower(path, offset=8)
    with open(path, "ab") as w:
        w.write(b"new run\n")
    assert f.read() == b"new run\n"


# -- watch --------------------------------------------------------------------

def test_watch_a_log_that_appears_and_grows(tmp_path):
    path = tmp_path / "late.log"

    def writer():
        time.sleep(0.3)
        with open(path, "w") as w:
            w.write(ARGS + "\n")
            w.flush()
            time.sleep(0.3)
            w.write(READY + "\n")

    t = threading.Thread(target=writer)
    t.start()
    started = time.monotonic()
    verdict = Watch(log=str(path), stall=30).run()
    t.join()
    assert verdict.outcome == "ready" and verdict.config["attention_backend"] == "triton"
    assert time.monotonic() - started < 5


def test_watch_stdin_to_a_verdict():
    proc = run_cli("watch", "--json", "-", stdin=(ARGS + "\nRuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & "
                                                  "CuDNN Compatibility Issue Detected\n").encode())
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert proc.returncode == 1
    assert events[0]["event"] == "start" and events[-1]["event"] == "failed"
    assert events[-1]["cause"] == "cudnn_version" and "phases" in events[-1]
    assert {"t", "event"} <= set(events[1])


def test_a_server_piped_into_watch_that_ends_before_ready_failed():
    # "server | firedup watch -": the pipe's end is the server's (killed mid-load, no error line)
    loading = ARGS + "\n[2025-04-09 05:05:04] Load weight begin. avail mem=1 GB\n"
    proc = run_cli("watch", "--json", "-", stdin=loading.encode())
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    assert proc.returncode == 1
    assert (verdict["outcome"], verdict["cause"], verdict["phase"]) == ("failed", "other", "weights")
    assert verdict["exit_code"] == -255 and "exited before it was ready" in verdict["explanation"]


@pytest.mark.parametrize("source", ["file", "/dev/null"])
def test_watch_stdin_redirected_from_a_file_reads_it_to_its_end(tmp_path, source):
    log = tmp_path / "s.log"
    log.write_text(ARGS + "\n" + "x" * 100 + "\n" * 30000 + READY + "\n")
    path = str(log) if source == "file" else source
    with open(path, "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "firedup", "watch", "--json", "-"], stdin=stdin,
                              capture_output=True, timeout=60)
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    assert b"Traceback" not in proc.stderr and b"Errno" not in proc.stderr, proc.stderr.decode()
    if source == "file":
        assert proc.returncode == 0 and verdict["outcome"] == "ready", verdict
    else:
        assert proc.returncode == 5 and verdict["outcome"] == "incomplete", verdict


def test_watch_a_pid_that_dies(tmp_path):
    log = tmp_path / "s.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(script(tmp_path, "print('loading', flush=True); time.sleep(0.5); sys.exit(3)"),
                                stdout=out, stderr=subprocess.STDOUT)
    verdict = Watch(log=str(log), pid=proc.pid, stall=30).run()
    proc.wait()
    assert verdict.outcome == "failed" and verdict.evidence["line"] == "loading"


def test_watch_usage_errors(tmp_path):
    assert run_cli("watch", str(tmp_path)).returncode == 2
    for pid in ("999999999", str(1 << 64)):
        proc = run_cli("watch", "--pid", pid, str(tmp_path / "x.log"))
        assert proc.returncode == 2 and proc.stderr.decode() == f"firedup: no process {pid}\n"
    for pid in ("-1", "0"):
        proc = run_cli("watch", "--pid", pid, "--stall", "5", str(tmp_path / "x.log"))
        said = f"firedup watch: error: argument --pid: must be 1 or more, not {pid} (see firedup watch --help)\n"
        assert proc.returncode == 2 and proc.stderr.decode() == said
    for seconds in ("0", "-1", "nan", "soon"):  # NaN would be a deadline that never passes
        proc = run_cli("watch", "--stall", seconds, str(tmp_path / "x.log"))
        assert proc.returncode == 2 and "--stall" in proc.stderr.decode(), (seconds, proc.stderr)
    for args, said in ((["--pid", str(os.getpid()), "a.log", "b.log"], "--pid goes with a single target"),
                       (["-", "b.log"], "- (standard input) goes alone: it is one server's output")):
        proc = run_cli("watch", *args)
        assert proc.returncode == 2 and proc.stderr.decode() == f"firedup: {said}\n", proc.stderr


@pytest.mark.parametrize("args, said", [
    (["watch", "--probe-generate", "x.log"], "needs the server's base URL: pass --url"),
    (["watch", "--probe-generate", "x.log", "y.log"], "needs the server's base URL: pass --url"),
    (["watch", "--probe-generate", "--url", "http://127.0.0.1:9", "ssh://h/x.log"], "does not go with ssh://h/x.log"),
    (["launch", "--probe-generate", "--", sys.executable, "-c", "open('started', 'w')"],
     "needs the server's base URL: pass --url"),
    (["launch", "--probe-generate", "--host", "h", "--", "vllm", "serve", "m"], "not with --host or --slurm"),
    (["launch", "--attach", "--host", "h", "--", "vllm", "serve", "m"], "--attach streams a server started on this"),
    (["launch", "--attach", "--slurm", "--", "vllm", "serve", "m"], "--attach streams a server started on this"),
])
def test_an_option_that_cannot_apply_to_the_target_is_refused(tmp_path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    proc = run_cli(args[0], "--stall", "5", *args[1:])
    stderr = proc.stderr.decode()
    assert proc.returncode == 2 and len(stderr.splitlines()) == 1 and said in stderr, stderr
    assert not (tmp_path / "started").exists()


# -- launch -------------------------------------------------------------------

def test_launch_to_ready_leaves_the_server_running(tmp_path):
    argv = script(tmp_path, f"print({ARGS!r}); time.sleep(0.2); print({READY!r}); time.sleep(60)")
    launched = start_and_watch(argv, name="ok", stall=30)
    try:
        assert launched.verdict.outcome == "ready"
        assert group_alive(launched.pgid) and "firedup stop ok" in launched.note
        proc = run_cli("ps", "--json", timeout=30)
        rows = json.loads(proc.stdout)
        assert rows[0]["name"] == "ok" and rows[0]["alive"] is True
        assert run_cli("stop", "ok").returncode == 0
        assert not group_alive(launched.pgid)
    finally:
        if group_alive(launched.pgid):
            os.killpg(launched.pgid, 9)


def test_ps_lists_what_runs_and_keeps_a_few_that_ended_with_all_their_logs(tmp_path, monkeypatch, capsys):
    """ps: what runs, and what is not known to have ended; a remote server firedup stopped is over, not
    'remote pid N' for ever, nor is a Slurm job the scheduler says ended (s15 M2); --all adds the ended;
    only the latest KEEP_ENDED records of those are kept."""
    sleeper = subprocess.Popen(["sleep", "60"])
    logs = tmp_path / "logs"
    logs.mkdir()

    def record(name, pid, created, **kw):
        (logs / f"{name}.log").write_text("a log\n")
        registry.Record(name=name, pid=pid, argv=["serve", name], log=str(logs / f"{name}.log"), url=None,
                        server=None, started=time.time(), created=created, **kw).save()

    try:
        record("up", sleeper.pid, psutil.Process(sleeper.pid).create_time())
        record("gone", 999999, 0.0)
        record("far", 4242, 0.0, host="gpu1")
        record("far-job", 0, 0.0, job="7")
        record("done-job", 0, 0.0, job="8")
        monkeypatch.setattr(_servers, "stop_remote", lambda run, grace, ssh_args: "terminated")
        monkeypatch.setattr(_servers.slurm, "state", lambda job, host: "RUNNING" if job == "7" else "CANCELLED")
        assert cli.main(["stop", "far"]) == 0
        assert cli.main(["ps"]) == 0
        shown = capsys.readouterr().out.splitlines()
        assert [line.split()[:2] for line in shown[1:-1]] == [["far-job", "running"], ["up", "running"]]
        assert shown[-1] == "(3 ended not shown: firedup ps --all)"
        assert cli.main(["ps", "--all", "--json"]) == 0
        rows = {r["name"]: (r["alive"], r["stopped"], r["pid"]) for r in json.loads(capsys.readouterr().out)}
        assert rows == {"far": (False, True, 4242), "far-job": (True, False, None), "done-job": (False, False, None),
                        "gone": (False, False, 999999), "up": (True, False, sleeper.pid)}
        assert cli.main(["ps", "--all"]) == 0
        assert "far                              stopped pid 4242" in capsys.readouterr().out
    finally:
        sleeper.kill()
    for i in range(registry.KEEP_ENDED + 2):
        record(f"old{i:02}", 999999, 0.0)
    # the latest ended ones (not the job that ended before them), and the job not known to have ended;
    # every log is still there
    assert {r.name for r in registry.records()} == {"far-job", *(f"old{i:02}" for i in range(2, 22))}
    assert len(list(logs.glob("*.log"))) == 5 + registry.KEEP_ENDED + 2


def test_launch_failure_stops_the_group_and_names_the_cause_within_2s_of_exit(tmp_path):
    body = ("import subprocess\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"print({ARGS!r}, flush=True)\n"
            "time.sleep(0.3)\n"
            "raise ModuleNotFoundError(\"No module named 'sgl_kernel'\")\n")
    started = time.monotonic()
    launched = start_and_watch(script(tmp_path, body), stall=30, grace=30)
    assert launched.verdict.outcome == "failed" and launched.verdict.cause == "missing_module"
    assert launched.verdict.exit_code == 1
    assert launched.verdict.evidence["line"] == "ModuleNotFoundError: No module named 'sgl_kernel'"
    assert time.monotonic() - started < 5
    assert not group_alive(launched.pgid)  # the orphaned child went with it


def test_a_start_stopped_from_outside_is_incomplete_not_a_hang(tmp_path):
    # someone's kill (docker stop, a supervisor) while it loads: Python's KeyboardInterrupt on SIGINT
    body = (f"print({ARGS!r}, flush=True)\n"
            "print('Loading safetensors checkpoint shards:  50% Completed | 2/4', flush=True)\n"
            "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n")
    launched = start_and_watch(script(tmp_path, body), stall=30)
    assert launched.verdict.outcome == "incomplete" and launched.verdict.outcome.exit_code == 5  # not 3
    assert "stopped from outside" in launched.verdict.explanation
    assert "Loading safetensors checkpoint shards" in launched.verdict.evidence["line"]


def test_an_offline_engines_script_that_exits_0_once_its_engine_is_up_is_ready_and_said_to_have_exited(tmp_path):
    body = ("print(\"INFO 06-06 13:03:08 [core.py:65] Initializing a V1 LLM engine (v0.9.0.1) with config: "
            "model='m', tokenizer='m'\", flush=True)\n"
            "print('INFO 06-06 13:03:54 [core.py:167] init engine (profile, create kv cache, warmup model) "
            "took 43.59 seconds', flush=True)\n")
    launched = start_and_watch(script(tmp_path, body), stall=30)
    assert launched.verdict.outcome == "ready" and "init engine" in launched.verdict.evidence["line"]
    assert launched.note.startswith("exited with status 0") and "stop it with" not in launched.note


def test_fatal_line_decides_before_the_process_exits(tmp_path):
    body = f"print({ARGS!r}, flush=True)\nraise OSError(98, 'Address already in use')\n"
    launched = start_and_watch(script(tmp_path, body), stall=30)
    assert launched.verdict.cause == "port_in_use"
    assert launched.verdict.evidence["line"] == "OSError: [Errno 98] Address already in use"


def test_launch_stall_is_left_running_unless_asked(tmp_path):
    argv = script(tmp_path, f"print({ARGS!r}, flush=True); time.sleep(60)")
    launched = start_and_watch(argv, stall=2)
    try:
        assert launched.verdict.outcome == "stalled" and launched.verdict.phase == "init"
        assert group_alive(launched.pgid) and "left running" in launched.note
    finally:
        os.killpg(launched.pgid, 9)
    launched = start_and_watch(argv, stall=2, kill_on_stall=True)
    assert launched.verdict.outcome == "stalled" and not group_alive(launched.pgid)


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed (the test extra installs it)")
def test_stalled_verdict_shows_where_the_server_waits(tmp_path):
    body = f"print({ARGS!r}, flush=True)\ndef read_shard():\n    time.sleep(60)\nread_shard()\n"
    launched = start_and_watch(script(tmp_path, body), stall=2, kill_on_stall=True)
    assert launched.verdict.outcome == "stalled"
    assert "read_shard" in launched.verdict.stacks


def test_silent_but_working_is_not_a_stall(tmp_path):
    """Like vLLM compiling for 40 s without a line: files written, memory moving."""
    body = (f"print({ARGS!r}, flush=True)\n"
            "blob = []\n"
            "for i in range(12):\n"
            "    with open(os.path.join(os.path.dirname(__file__), f'cache{i}'), 'wb') as f:\n"
            "        f.write(os.urandom(256 << 10))\n"
            "    blob.append(bytearray(8 << 20))\n"
            "    time.sleep(0.5)\n"
            f"print({READY!r}, flush=True)\n"
            "time.sleep(60)\n")
    launched = start_and_watch(script(tmp_path, body), stall=3, kill_on_stall=True)
    try:
        assert launched.verdict.outcome == "ready", launched.verdict
        assert launched.verdict.elapsed > 5
    finally:
        if group_alive(launched.pgid):
            os.killpg(launched.pgid, 9)


def test_the_access_lines_of_health_checks_are_no_progress(tmp_path):
    """An HTTP server that is up but never healthy (a warm-up that hangs, a front end up before its
    shards), probed by firedup every half second: each probe's access line (here Python's
    http.server's 404s) is the server echoing the probe, not start-up going on, so the stall window
    runs out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    launched = start_and_watch(argv, url=f"http://127.0.0.1:{port}", stall=3, kill_on_stall=True)
    assert launched.verdict.outcome == "stalled" and launched.verdict.elapsed < 10, launched.verdict
    echoed = [line for line in open(launched.record.log) if '"GET /' in line]
    assert len(echoed) >= 4 and all('HTTP/1.1" 404' in line for line in echoed), echoed


@pytest.mark.parametrize("watch_first", [False, True], ids=["restart-begun", "restart-not-yet-begun"])
def test_a_ready_run_killed_without_a_word_is_not_the_verdict_of_the_restart_appended_to_its_log(tmp_path,
                                                                                                  watch_first):
    """transformers serve ready, then SIGKILLed (no shutdown line), restarted with `>>` onto a truncated
    checkpoint: the log's writer is the new server, and nothing listens on the port the old run's ready
    line names, so that ready run is over and the run being written decides. Its "Loading" line begins
    a new run whether it is already in the log when the watch starts or comes later."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    old = (FIXTURES / "captured" / "tf-ready.log").read_text()
    old = old[:old.index("\n", old.index("Uvicorn running on")) + 1]
    log = tmp_path / "server.log"
    log.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", old))
    new = tmp_path / "restart.txt"
    new.write_text((FIXTURES / "captured" / "tf-truncated-shard.log").read_text())
    server = tmp_path / "transformers"  # its command line reads as transformers serve's
    server.write_text("import sys, time\nlines = open(sys.argv[-2]).readlines()\ntime.sleep(float(sys.argv[-1]))\n"
                      "sys.stdout.write(lines[0])\nsys.stdout.flush()\ntime.sleep(4)\n"
                      "sys.stdout.writelines(lines[1:])\nsys.exit(1)\n")
    with open(log, "ab") as out:
        restart = subprocess.Popen([sys.executable, "-u", str(server), "serve", str(new), "2" if watch_first else "0"],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        if not watch_first:
            while "models-broken" not in log.read_text():
                time.sleep(0.05)
        proc = run_cli("watch", "--json", "--stall", "30", str(log))
        verdict = json.loads(proc.stdout.splitlines()[-1])
        assert (proc.returncode, verdict["outcome"], verdict["cause"]) == (1, "failed", "corrupt_checkpoint"), verdict
    finally:
        restart.kill()
        restart.wait()


def test_a_server_run_elsewhere_through_srun_is_ready_by_its_line_though_its_port_is_not_here(tmp_path):
    """srun transformers serve ... > log on a login node: the writer is srun, the server listens on a
    compute node, so no socket here holds the port its ready line names. That line is not an ended run's."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ready = (FIXTURES / "captured" / "tf-ready.log").read_text()
    ready = ready[:ready.index("\n", ready.index("Uvicorn running on")) + 1]
    ready = re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", ready)
    lines = tmp_path / "server.txt"
    lines.write_text(ready)
    relay = tmp_path / "srun"  # its command line reads as srun transformers serve ...
    relay.write_text("import sys, time\nsys.stdout.write(open(sys.argv[-1]).read())\nsys.stdout.flush()\n"
                     "time.sleep(30)\n")
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        srun = subprocess.Popen([sys.executable, "-u", str(relay), "transformers", "serve", str(lines)], stdout=out)
    try:
        while "Uvicorn running on" not in log.read_text():
            time.sleep(0.05)
        proc = run_cli("watch", "--json", "--stall", "5", str(log))
        verdict = json.loads(proc.stdout.splitlines()[-1])
        assert (proc.returncode, verdict["outcome"]) == (0, "ready"), verdict
    finally:
        srun.kill()
        srun.wait()


def test_launch_timeout_stops_the_server(tmp_path):
    body = "for i in range(100):\n    print(f'still loading {i}', flush=True)\n    time.sleep(0.2)\n"
    launched = start_and_watch(script(tmp_path, body), stall=5, timeout=1.5)
    assert launched.verdict.outcome == "timeout" and not group_alive(launched.pgid)


def test_a_progress_bar_is_read_as_it_is_drawn_not_a_redraw_later(tmp_path):
    bar = "\rLoading safetensors checkpoint shards:  25% Completed | 1/4 [00:30<01:30, 30.0s/it]"
    body = (f"print({ARGS!r}, flush=True)\n"
            f"sys.stdout.write({bar!r}); sys.stdout.flush()\n"  # tqdm ends it only with the next redraw
            "time.sleep(30)\n")
    launched = start_and_watch(script(tmp_path, body), stall=10, timeout=2)
    assert launched.verdict.outcome == "timeout"
    assert launched.verdict.progress == {"desc": "Loading safetensors checkpoint shards", "n": 1, "total": 4}


def test_cli_launch_json_events(tmp_path):
    argv = script(tmp_path, f"print({ARGS!r}); print({READY!r}, flush=True); time.sleep(30)")
    proc = run_cli("launch", "--json", "--name", "j", "--", *argv)
    try:
        events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
        assert proc.returncode == 0
        assert [e["event"] for e in events][:1] == ["start"] and events[-1]["event"] == "ready"
        assert "config" in [e["event"] for e in events]
        assert events[-1]["note"].startswith("running: pid")
    finally:
        run_cli("stop", "j")


# docs/contract.md: every field of diagnose --json, and the live ones
VERDICT_FIELDS = {"outcome", "cause", "server", "phase", "evidence", "explanation", "remedy", "progress", "config",
                  "benign", "version", "elapsed", "phases", "exit_code"}


def test_cli_launch_onto_a_taken_port_prints_a_whole_verdict(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        proc = run_cli("launch", "--json", "--name", "p", "--", sys.executable, "-c", "pass", "--port", str(port))
    verdict = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 1 and (verdict["event"], verdict["cause"]) == ("failed", "port_in_use")
    assert VERDICT_FIELDS <= verdict.keys(), VERDICT_FIELDS - verdict.keys()
    assert (verdict["elapsed"], verdict["phases"], verdict["exit_code"]) == (0.0, {}, None)


def test_a_port_taken_by_a_known_process_is_fixed_by_stopping_it_by_name(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)  # answers 501: a foreign server
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        proc = run_cli("launch", "--json", "--", sys.executable, "-c", "pass", "--port", str(port))
        refused = json.loads(proc.stdout.splitlines()[-1])
        bind = (f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
                "address already in use")
        body = f"print('INFO:     Started server process', flush=True)\ntime.sleep(1.5)\nprint({bind!r}, flush=True)\n"
        failed = start_and_watch(script(tmp_path, body), server="transformers", url=f"http://127.0.0.1:{port}",
                                 port_check=False, stall=30).verdict
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert refused["cause"] == "port_in_use" and f"kill {os.getpid()}" in refused["remedy"]
    assert failed.cause == "port_in_use" and failed.remedy.startswith(f"Stop pid {os.getpid()} (")
    assert "ss -ltnp" not in failed.remedy + refused["remedy"]
    # the generic rule for a server's own port explains it, not one for a library's port (HCCL's)
    assert refused["explanation"].endswith(rules.load().rule("port-in-use").explanation)


def test_python_api_and_fixture(tmp_path, firedup_server):
    argv = script(tmp_path, f"print({READY!r}, flush=True); time.sleep(30)")
    server = firedup_server(argv, server="sglang", stall=30)
    assert server.verdict.outcome == "ready" and group_alive(server.pid)
    with pytest.raises(firedup.ServerFailed) as err:
        with firedup.launch(script(tmp_path, "print('x', flush=True); raise SystemExit(2)"), stall=30):
            pass
    assert err.value.verdict.exit_code == 2


@pytest.mark.parametrize("argv,family,url", [
    (["python", "-m", "sglang.launch_server", "--model-path", "m", "--port", "31000"], "sglang", "http://127.0.0.1:31000"),
    (["vllm", "serve", "m", "--host", "0.0.0.0"], "vllm", "http://127.0.0.1:8000"),
    (["llama-server", "-m", "x.gguf", "--port=9000", "--host", "::1"], "llamacpp", "http://[::1]:9000"),
    (["python", "server.py"], None, None),
    (["bash", "-c", "exec transformers serve m --host 127.0.0.1 --port 18644"], "transformers", "http://127.0.0.1:18644"),
    (["sh", "-ec", "cd /srv && vllm serve m --port=8001"], "vllm", "http://127.0.0.1:8001"),
    (["bash", "-c", "mkdir -p /tmp/x && exec vllm serve m"], "vllm", "http://127.0.0.1:8000"),
])
def test_url_from_the_command_line(argv, family, url):
    assert derive_url(argv, family) == url


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_stops_the_whole_group_and_says_so(tmp_path, sig, code):
    # SIGTERM is how timeout(1), a cancelled CI job and systemd stop firedup
    body = ("import subprocess\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"print({ARGS!r}, flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "launch", "--name", "c", "--json", "--",
                             *script(tmp_path, body)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start = json.loads(proc.stdout.readline())
    time.sleep(1.0)
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == code
    assert not group_alive(start["pid"])
    assert "stopped the server's process group" in proc.stderr.read().decode()


def test_attach_streams_the_log_until_the_server_exits(tmp_path):
    body = f"print({READY!r}, flush=True)\ntime.sleep(1)\nprint('served one request', flush=True)\n"
    proc = run_cli("launch", "--attach", "--", *script(tmp_path, body))
    out = proc.stdout.decode()
    assert proc.returncode == 0 and "ready" in out and "served one request" in out
    assert "Ctrl-C stops it" in out and "firedup stop" not in out and "tail -f" not in out
    # with --json, standard output is JSON lines only: the server's output goes to standard error
    proc = run_cli("launch", "--attach", "--json", "--", *script(tmp_path, body))
    assert proc.returncode == 0 and b"served one request" in proc.stderr
    assert [json.loads(line)["event"] for line in proc.stdout.splitlines()][-1] == "ready"


def test_attach_says_a_crash_while_serving_even_when_the_server_exits_0(tmp_path):
    # vLLM's API server exits 0 after its engine died: the log says it failed
    crash = ("[2025-04-09 05:06:00] Scheduler hit an exception: Traceback (most recent call last):\n"
             "  File \"scheduler.py\", line 1, in event_loop\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    body = f"print({ARGS!r}, flush=True)\nprint({READY!r}, flush=True)\ntime.sleep(1)\nprint({crash!r}, flush=True)\n"
    proc = run_cli("launch", "--attach", "--json", "--", *script(tmp_path, body))
    last = json.loads(proc.stdout.splitlines()[-1])
    assert proc.returncode == 1 and (last["event"], last["phase"], last["exit_code"]) == ("failed", "serving", 0)
    assert "illegal memory access" in last["evidence"]["line"]


def test_a_second_launch_of_a_name_starts_a_fresh_log_and_keeps_the_previous(tmp_path):
    """Seen on a GPU: the second start appended to the first's log, and diagnose named the first's failure."""
    logs = tmp_path / "state" / "firedup" / "logs"
    for module in ("opentelemetry_not_installed", "httpx2_not_installed"):
        proc = run_cli("launch", "--name", "twice", "--json", "--", sys.executable, "-c", f"import {module}")
        assert proc.returncode == 1
        assert json.loads(proc.stdout.splitlines()[-1])["cause"] == "missing_module"
    assert "httpx2_not_installed" in (logs / "twice.log").read_text()
    assert "opentelemetry" not in (logs / "twice.log").read_text()
    assert "opentelemetry_not_installed" in (logs / "twice.1.log").read_text()
    verdict = json.loads(run_cli("diagnose", "--json", str(logs / "twice.log")).stdout)
    assert "httpx2_not_installed" in verdict["evidence"]["line"]


@pytest.mark.parametrize("title, server, header", [
    ("launch transformers", "transformers", "launch transformers phase: weights"),  # transformers serve
    ("launch python", "sglang", "launch python sglang  phase: weights"),
])
def test_the_live_header_names_the_family_once(title, server, header):
    live = LiveView(Console(file=io.StringIO(), force_terminal=True), title)
    live.update({"server": server, "phase": "weights", "elapsed": 3.0, "last": ""})
    live.close()
    shown = Console(file=io.StringIO(), width=100, record=True)
    shown.print(live.live.renderable)
    assert shown.export_text().startswith(header)


def test_two_local_logs_watched_at_once_each_get_their_verdict(tmp_path):
    """One thread a target, one compiled prefilter: each thread scans with its own scratch."""
    logs = [str(FIXTURES / "captured" / f"{name}.log") for name in ("vllm-truncated-shard", "tf-bad-flag")]
    proc = run_cli("watch", "--json", "--stall", "30", *logs, timeout=60)
    assert b"Traceback" not in proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events[-1]["event"] == "overall" and events[-1]["outcome"] == "failed"
    assert events[-1]["targets"] == {logs[0]: "failed", logs[1]: "failed"} and proc.returncode == 1


@pytest.mark.parametrize("fields, said", [
    ({"code": -255}, "exit: ended (its exit status went to its parent, not to firedup)"),
    ({"code": -9}, "exit: killed by SIGKILL"),
    ({"code": 3}, "exit: code 3"),
    ({"code": 1, "line": "slurm: job 7 ended FAILED"}, "exit: slurm: job 7 ended FAILED (code 1)"),
])
def test_an_exit_is_said_in_words(fields, said):
    out = io.StringIO()
    PlainView(Console(file=out, width=200)).event(1.0, "exit", **fields)
    assert out.getvalue().strip() == f"[    1.0s] {said}"
