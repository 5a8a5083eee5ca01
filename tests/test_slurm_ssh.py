"""Slurm through a login node: a real OpenSSH server on 127.0.0.1 (tests/sshd.py)
in front of the real two-node cluster (tests/slurmd.py). One SSH connection
carries the scheduler's commands and every log of the job."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from firedup import slurm
from firedup.sources.slurm import LoginNode
from firedup.sources.ssh import Host

from .conftest import run_cli
from .test_servers import Recorder, free_port
from .test_slurm import cluster, health_server, job_state, wait_ended  # noqa: F401 - cluster is a fixture
from .test_ssh import ssh_env, sshd  # noqa: F401 - fixtures: the test sshd, ssh pointed at it

# It loads for 3 s (longer than squeue's 2 s, so the scheduler has said where it
# runs: its health is probed there).
SERVER = health_server(3)


class Connections:
    """Every sshd connection process seen while it runs (sampled every 20 ms)."""

    def __init__(self, sshd):
        self.sshd, self.seen, self._stop = sshd, set(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.wait(0.02):
            self.seen.update(self.sshd.children())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def server(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    return ["python3", str(script), "--port", str(free_port())]


def test_launch_through_the_login_node_is_ready_over_one_connection_and_stopped_there(cluster, sshd, tmp_path):
    argv = server(tmp_path)
    with Connections(sshd) as connections:
        start = time.monotonic()
        proc = run_cli("launch", "--slurm", "--host", "testhost", "--name", "hub", "--log-dir",
                       str(tmp_path / "logs"), "--json", "--", *argv, timeout=120)
        elapsed = time.monotonic() - start
    events = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    verdict = events[-1]
    assert proc.returncode == 0 and verdict["outcome"] == "ready", proc.stderr.decode()[-2000:]
    # the head's health, probed by the agent on the login node at the node's address
    assert verdict["evidence"]["line"] == f"GET http://127.0.0.1:{argv[-1]}/health -> 200"
    job = verdict["slurm"]["job"]
    assert verdict["slurm"]["logs"]["job"] == str(tmp_path / "logs" / f"hub-{job}.log")
    assert any(e["event"] == "start" and e["log"].startswith("ssh://testhost/") for e in events)
    assert len(connections.seen) == 1, connections.seen
    print(f"ready through the login node in {elapsed:.1f} s, {verdict['slurm']['polls']} squeue calls")
    assert verdict["slurm"]["polls"] <= elapsed / 2 + 1  # at most one squeue per 2 s
    assert job_state(job) == "RUNNING"
    ps = json.loads(run_cli("ps", "--json").stdout)
    assert [(r["name"], r["host"], r["job_state"]) for r in ps] == [("hub", "testhost", "RUNNING")]
    stop = run_cli("stop", "hub")
    assert stop.returncode == 0 and b"scancel on testhost" in stop.stdout, stop.stderr
    assert wait_ended(job) == "CANCELLED"


def test_one_connection_carries_every_log_of_a_two_node_job(cluster, sshd, tmp_path):
    script = tmp_path / "two.sh"
    script.write_text('#!/bin/bash\nif [ "$SLURM_PROCID" = 0 ]; then exec "$@"; fi\n'
                      'echo "worker $SLURMD_NODENAME: up"\nexec sleep 600\n')
    script.chmod(0o755)
    commands = LoginNode(Host.parse("testhost"))
    recorder = Recorder()
    try:
        launched = slurm.launch([str(script), *server(tmp_path)], name="hub2", nodes=2, log_dir=tmp_path / "logs",
                                sinks=[recorder], commands=commands, stall=60)
        connects = commands.channel.connects
    finally:
        commands.close()
    try:
        assert launched.verdict.outcome == "ready", launched.verdict
        assert set(launched.verdict.slurm["logs"]) == {"job", "n1", "n2"} and connects == 1
        assert launched.record.host == "testhost"
        assert any(name == "start" and fields["log"].startswith("ssh://testhost/")
                   for _, name, fields in recorder.events)
    finally:
        slurm.stop(launched.record)


def test_watch_a_failing_job_through_the_login_node(cluster, tmp_path):
    log, script = tmp_path / "theirs.log", tmp_path / "theirs.sh"
    script.write_text("#!/bin/bash\necho starting; sleep 2\n"
                      "echo 'Traceback (most recent call last):'\necho '  File \"x.py\", line 1, in f'\n"
                      "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'\nexit 1\n")
    job = subprocess.run(["sbatch", "--parsable", "-o", str(log), str(script)], capture_output=True, text=True,
                         check=True).stdout.strip()
    proc = run_cli("watch", f"slurm://testhost/{job}", "--json", timeout=60)
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    assert proc.returncode == 1 and verdict["outcome"] == "failed", proc.stderr.decode()[-2000:]
    assert verdict["cause"] == "cuda_oom" and "CUDA out of memory" in verdict["evidence"]["line"]
    assert verdict["slurm"]["job"] == job and verdict["slurm"]["logs"]["job"] == str(log)


def test_three_nodes_through_the_login_node_is_rejected_within_5_s(cluster, tmp_path):
    start = time.monotonic()  # the SSH connection included
    commands = LoginNode(Host.parse("testhost"))
    try:
        launched = slurm.launch(["sleep", "60"], name="three", nodes=3, log_dir=tmp_path / "logs", commands=commands)
    finally:
        commands.close()
    elapsed = time.monotonic() - start
    v = launched.verdict
    print(f"rejected through the login node in {elapsed:.2f} s, the SSH connection included")
    assert v.cause == "scheduler_rejected" and "PartitionNodeLimit" in v.evidence["line"], v
    assert elapsed < 5, elapsed
    assert launched.note == f"cancelled job {v.slurm['job']} (scancel on testhost)"
    assert wait_ended(v.slurm["job"]) == "CANCELLED"


@pytest.mark.parametrize("target, message", [
    ("slurm://testhost/x12", "not a Slurm job"),
    ("slurm://a/b/12", "not a Slurm job"),
    ("slurm://nobody-here@testhost/12", "authentication failed"),
])
def test_bad_slurm_targets_are_one_clear_line(target, message):
    proc = run_cli("watch", target)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and message in err and err.count("\n") == 1, err


def test_a_dropped_connection_is_reopened_and_the_job_followed_on(cluster, sshd, tmp_path):
    commands = LoginNode(Host.parse("testhost"))
    recorder = Recorder()

    class DropOnRunning:  # kill sshd's process for the connection once the job runs
        def event(self, t, name, **fields):
            recorder.event(t, name, **fields)
            if name == "running":
                for child in sshd.children():
                    os.kill(child, signal.SIGKILL)

        def update(self, view):
            pass

    try:
        launched = slurm.launch(server(tmp_path), name="drop", log_dir=tmp_path / "logs", sinks=[DropOnRunning()],
                                commands=commands, stall=60)
        connects = commands.channel.connects
    finally:
        commands.close()
    try:
        assert launched.verdict.outcome == "ready", launched.verdict
        assert connects == 2 and any(name == "disconnected" for _, name, _ in recorder.events)
        # the health probe, asked for as the connection dropped, runs on the new one
        assert launched.verdict.evidence["line"].endswith("/health -> 200")
    finally:
        slurm.stop(launched.record)
