"""Remote targets through a real OpenSSH server started on 127.0.0.1 with a
throw-away host key and user key (FIREDUP_SSH_ARGS points ssh at its config)."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from firedup._exceptions import SSHError
from firedup._launch import start_remote, stop_remote
from firedup.ledger.store import Ledger
from firedup.sources.ssh import Host, RemoteSource
from firedup.watch import Watch

from .conftest import run_cli
from .sshd import SSHD, Sshd
from .test_servers import MODEL, TF, Recorder, free_port, need

ARGS = "[2025-04-09 05:05:03] server_args=ServerArgs(model_path='m', attention_backend='triton')\n"
READY = "[2025-04-09 05:05:21] The server is fired up and ready to roll!\n"

if not os.path.exists(SSHD):
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the SSH tests, but sshd is missing (apt-get install openssh-server)")
    pytest.skip("sshd is not installed (apt-get install openssh-server)", allow_module_level=True)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def ssh_env(sshd, monkeypatch, tmp_path):
    monkeypatch.setenv("FIREDUP_SSH_ARGS", f"-F {sshd.config}")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def append_later(path, text, delay):
    def write():
        time.sleep(delay)
        with open(path, "a") as f:
            f.write(text)
    t = threading.Thread(target=write)
    t.start()
    return t


def test_watch_a_remote_log_to_ready_over_one_connection(sshd, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    writer = append_later(log, READY, 1.0)
    source = RemoteSource(Host.parse("testhost"), str(log))
    try:
        watch = Watch(remote=source, stall=30)
        verdict = watch.run()
        assert len(sshd.children()) == 1
    finally:
        source.close()
    writer.join()
    assert verdict.outcome == "ready" and verdict.server == "sglang"
    assert verdict.config["attention_backend"] == "triton"
    assert source.connects == 1


def test_remote_failure_with_cause_from_the_cli(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS + "RuntimeError: CRITICAL WARNING: PyTorch 2.9.1 & CuDNN Compatibility Issue Detected\n")
    proc = run_cli("watch", "--json", f"ssh://testhost{log}")
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    assert proc.returncode == 1 and verdict["cause"] == "cudnn_version"
    assert "SGLANG_DISABLE_CUDNN_CHECK" in verdict["remedy"]


def test_connection_killed_mid_watch_resumes_without_losing_or_repeating_a_line(sshd, tmp_path):
    log = tmp_path / "server.log"
    lines = [f"line {i}\n" for i in range(3000)]

    def writer():
        with open(log, "w") as f:
            for i, line in enumerate(lines):
                f.write(line)
                f.flush()
                if i % 100 == 0:
                    time.sleep(0.05)

    t = threading.Thread(target=writer)
    t.start()
    source = RemoteSource(Host.parse("testhost"), str(log))
    received = b""
    killed = 0
    deadline = time.monotonic() + 60
    try:
        while received.count(b"\n") < len(lines) and time.monotonic() < deadline:
            for kind, payload in source.events():
                if kind == "log":
                    received += payload
            if not killed and received.count(b"\n") > 500:
                for child in sshd.children():  # sshd's process for this connection
                    os.kill(child, 9)
                killed = 1
            time.sleep(0.01)
    finally:
        source.close()
        t.join()
    assert killed and source.connects >= 2
    assert received.decode() == "".join(lines)


def test_remote_rotation_and_truncation_are_followed(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("one\n")
    source = RemoteSource(Host.parse("testhost"), str(log))
    received = []

    def drain(until):
        deadline = time.monotonic() + 10
        while "".join(received).count("\n") < until and time.monotonic() < deadline:
            received.extend(p.decode() for k, p in source.events() if k == "log")
            time.sleep(0.01)

    try:
        drain(1)
        os.rename(log, tmp_path / "server.log.1")
        log.write_text("two\n")
        drain(2)
        log.write_text("")
        time.sleep(0.2)
        with open(log, "a") as f:
            f.write("three\n")
        drain(3)
    finally:
        source.close()
    assert "".join(received) == "one\ntwo\nthree\n"


def test_remote_pid_exit_fails_the_watch(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    server = subprocess.Popen(["sleep", "600"])
    source = RemoteSource(Host.parse("testhost"), str(log), pid=server.pid)
    # killed once the agent has reported (it checked the pid first): a kill before that is a mistyped
    # --pid's error, which a loaded machine's slow ssh start would otherwise give
    reported = threading.Event()
    events = source.events

    def events_seen():
        out = events()
        if out:
            reported.set()
        return out

    source.events = events_seen
    killer = threading.Thread(target=lambda: reported.wait(60) and server.kill(), daemon=True)
    killer.start()
    try:
        verdict = Watch(remote=source, stall=30).run()
    finally:
        source.close()
        server.wait()
    assert verdict.outcome == "failed" and verdict.exit_code is not None


def test_path_missing_waits_like_a_local_file_until_the_stall_window(tmp_path):
    source = RemoteSource(Host.parse("testhost"), str(tmp_path / "not-yet.log"))
    try:
        verdict = Watch(remote=source, stall=2).run()
    finally:
        source.close()
    assert verdict.outcome == "stalled"
    # and says so as a local watch does: waiting at once, and the note at the verdict
    target = f"ssh://testhost{tmp_path}/no/such.log"
    events = [json.loads(line) for line in run_cli("watch", "--json", "--stall", "3", target).stdout.splitlines()]
    waiting = [e for e in events if e["event"] == "waiting"]
    assert [e["log"] for e in waiting] == [target]
    assert events[-1]["outcome"] == "stalled" and events[-1]["notes"] == [f"the log {target} never appeared"]
    # a log that appears once the agent said it was not there is followed, and the note is not given
    (tmp_path / "no").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "watch", "--json", "--stall", "2", target],
                            stdout=subprocess.PIPE, text=True)
    events = [json.loads(proc.stdout.readline()) for _ in range(2)]
    (tmp_path / "no" / "such.log").write_text(ARGS)
    events += [json.loads(line) for line in proc.stdout]
    proc.wait(timeout=30)
    said = [e["event"] for e in events]
    assert said[1] == "waiting" and "following" in said and "notes" not in events[-1]


@pytest.mark.parametrize("target,message", [
    ("ssh://no-such-host.invalid/var/log/x.log", "unknown host no-such-host.invalid"),
    ("ssh://nobody-here@testhost/var/log/x.log", "authentication failed"),
    ("ssh://testhost/", "not a remote log"),
])
def test_clear_errors(target, message):
    proc = run_cli("watch", target)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and message in err and err.count("\n") == 1


def test_unreadable_remote_log(tmp_path):
    proc = run_cli("watch", f"ssh://testhost{tmp_path}")  # a directory: like permission denied, not readable
    assert proc.returncode == 2 and "cannot read" in proc.stderr.decode()


def test_two_targets_at_once_one_failing(tmp_path):
    ok, bad = tmp_path / "node0.log", tmp_path / "node1.log"
    ok.write_text(ARGS + READY)
    bad.write_text(ARGS + "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\nKilled\n")
    proc = run_cli("watch", "--json", "--all", f"ssh://testhost{ok}", str(bad))
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    overall = events[-1]
    assert proc.returncode == 1
    assert overall["event"] == "overall" and overall["outcome"] == "failed" and overall["target"] == str(bad)
    verdicts = {e["target"]: e for e in events if e.get("event") in ("ready", "failed")}
    assert verdicts[str(bad)]["cause"] in ("cuda_oom", "host_oom")


def test_a_log_under_the_remote_home_is_named_as_a_target_to_paste():
    """launch --host writes its logs under ~/.local/state/firedup/logs: ssh://host/~/... watches such a log,
    and the watch names it so (not ssh://host~/...)."""
    home_log = Path.home() / ".cache" / f"firedup-test-{os.getpid()}.log"
    home_log.parent.mkdir(parents=True, exist_ok=True)
    home_log.write_text(ARGS + READY)
    target = f"ssh://testhost/~/{home_log.relative_to(Path.home())}"
    try:
        proc = run_cli("watch", "--json", target)
    finally:
        home_log.unlink()
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and events[0]["log"] == target and events[-1]["outcome"] == "ready", events


def test_one_target_that_cannot_be_watched_hides_no_others_verdict(tmp_path):
    """A node whose host refuses: its one line on stderr, exit 2, and the other target's verdict all the same
    (with --all, the nodes are one server: then the one line alone)."""
    ok = tmp_path / "node0.log"
    ok.write_text(ARGS + READY)
    dead = f"ssh://testhost:{free_port()}/var/log/x.log"
    proc = run_cli("watch", "--json", str(ok), dead)
    verdicts = [e for e in map(json.loads, proc.stdout.decode().splitlines()) if e.get("event") == "ready"]
    assert proc.returncode == 2 and [v["target"] for v in verdicts] == [str(ok)]
    assert proc.stderr.decode().startswith(f"firedup: {dead}: cannot reach testhost:") and proc.stderr.count(b"\n") == 1
    together = run_cli("watch", "--json", "--all", str(ok), dead)
    assert together.returncode == 2 and together.stderr.decode().startswith(f"firedup: {dead}: cannot reach")


@need(TF)
def test_remote_launch_of_the_tiny_model_server(sshd):
    port = free_port()
    argv = [str(TF), "serve", str(MODEL), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    ledger = Ledger()
    launched = start_remote(Host.parse("testhost"), ["env", "HF_HUB_OFFLINE=1", *argv], name="remote-tf",
                              server="transformers", stall=120, ledger=ledger)
    run, verdict, note = launched.record, launched.verdict, launched.note
    try:
        assert verdict.outcome == "ready", verdict
        recorded = ledger.get(verdict.run_id)
        assert recorded["host"] == "testhost" and recorded["outcome"] == "ready"
        assert recorded["environment"]["packages"]["transformers"]  # read by the remote server's own python
        assert "firedup stop remote-tf" in note and run.host == "testhost"
        assert os.path.exists(os.path.expanduser(run.log))
    finally:
        assert stop_remote(run, 10) in ("terminated", "killed")
    assert stop_remote(run, 1) == "gone"


CUDNN = ('Traceback (most recent call last):\n'
         '  File "/x/launch_server.py", line 1, in <module>\n'
         'RuntimeError: cuDNN version incompatibility: PyTorch was compiled against cuDNN 9.8 '
         'but the system runtime is cuDNN 9.6\n')


def test_remote_log_alone_a_traceback_then_silence_is_failed_within_3_s(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "watch", "--json", "--server", "sglang",
                             f"ssh://testhost{log}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for line in proc.stdout:  # the agent has the log open and found no writer
        event = json.loads(line)
        if event["event"] == "writer":
            assert event["pid"] is None
            break
    with open(log, "a") as f:
        f.write(CUDNN)
    written = time.monotonic()
    verdict = json.loads(proc.stdout.read().splitlines()[-1])
    assert time.monotonic() - written <= 3.0
    assert (verdict["outcome"], verdict["cause"]) == ("failed", "cudnn_version")


def test_remote_writer_is_found_and_its_exit_decides(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    with open(log, "a") as out:
        server = subprocess.Popen(["sleep", "600"], stdout=out)
    source = RemoteSource(Host.parse("testhost"), str(log))

    class KillOnceFound(Recorder):  # the writer exits once the agent has found it, however long SSH took
        def event(self, t, name, **fields):
            super().event(t, name, **fields)
            if name == "writer":
                server.kill()

    recorder = KillOnceFound()
    try:
        verdict = Watch(remote=source, stall=30, sinks=[recorder]).run()
    finally:
        source.close()
        server.wait()
    writers = [fields for _, name, fields in recorder.events if name == "writer"]
    assert writers == [{"pid": server.pid, "command": "sleep 600"}]
    assert verdict.outcome == "failed" and verdict.exit_code is not None


def test_a_host_that_refuses_is_one_line_at_once():
    """Nothing listens on the port: no stall window waited out, no verdict on a server never reached."""
    port = free_port()
    started = time.monotonic()
    proc = run_cli("watch", f"ssh://testhost:{port}/var/log/x.log", "--stall", "60")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith(f"firedup: cannot reach testhost:{port} (ssh: connect to host 127.0.0.1 port {port}"), err
    assert time.monotonic() - started < 20


def test_a_remote_pid_that_does_not_exist_is_bad_input_not_a_failed_server(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    beyond = 2 ** 22 + 1  # above Linux's largest pid_max
    proc = run_cli("watch", f"ssh://testhost{log}", "--pid", str(beyond), "--stall", "60")
    assert proc.returncode == 2 and proc.stderr.decode() == f"firedup: no process {beyond} on this host\n"


def test_a_remote_launch_of_a_command_that_cannot_start_is_one_line_and_leaves_nothing_to_stop():
    proc = run_cli("launch", "--host", "testhost", "--name", "nocommand", "--stall", "60", "--",
                   "/nonexistent/bin/server", "--port", str(free_port()))
    assert proc.returncode == 2 and proc.stderr.decode() == (
        "firedup: cannot start /nonexistent/bin/server on this host: No such file or directory\n")
    assert b"nocommand" not in run_cli("ps", "--all").stdout


def test_a_host_lost_for_the_whole_stall_window_is_no_verdict_on_the_server(tmp_path, monkeypatch):
    """The server is fine; the host went out of reach mid-watch and stayed so: not `stalled`."""
    (tmp_path / "sshd").mkdir()
    own = Sshd(tmp_path / "sshd").start()  # this test's own, to take down
    monkeypatch.setenv("FIREDUP_SSH_ARGS", f"-F {own.config}")
    log = tmp_path / "server.log"
    log.write_text(ARGS)
    source = RemoteSource(Host.parse("testhost"), str(log))
    watch = Watch(remote=source, stall=3)

    def take_down():
        for child in own.children():  # the connection, then the daemon: no reconnecting
            os.kill(child, 9)
        own.stop()

    threading.Timer(1.0, take_down).start()
    try:
        with pytest.raises(SSHError, match=r"^lost the connection to testhost \d+ s ago and could not reconnect "
                                           r"\(ssh: .*\): no verdict on the server$"):
            watch.run()
    finally:
        source.close()
        own.stop()
