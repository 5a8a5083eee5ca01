"""Liveness evidence from a real process tree (sources/procstat.py)."""

import signal
import subprocess
import time

from firedup.sources.procstat import TreeSampler, working
from firedup.watch import STOPPED_NOTE, Watch


def _sample(commands, pids=(1,), rss=0):
    return {"pids": list(pids), "commands": commands, "rss": rss, "read": 0, "write": 0, "gpu": None}


def test_a_child_counts_as_work_only_when_it_runs_a_command_the_tree_had_not_run():
    ran: set[str] = set()
    assert not working(None, _sample(["bash loop.sh", "sleep 1"], (1, 2)), ran)
    assert not working(_sample(["bash loop.sh", "sleep 1"], (1, 2)), _sample(["bash loop.sh", "sleep 1"], (1, 3)), ran)
    assert working(_sample(["bash loop.sh"]), _sample(["bash loop.sh", "nvcc -c a.cu"], (1, 4)), ran)
    assert not working(_sample(["bash loop.sh"]), _sample(["bash loop.sh", "nvcc -c a.cu"], (1, 5)), ran)


def _progress_over(command: str, seconds: float, first: str = "sleep") -> list[bool]:
    """Whether each sample of ``command``'s tree (every 0.3 s, as TreeSampler.progress takes them)
    showed it working, from when a ``first`` command was seen running (a loaded machine may take
    a while to start it)."""
    proc = subprocess.Popen(["bash", "-c", command])
    try:
        sampler = TreeSampler(proc.pid)
        ran: set[str] = set()
        last = None
        give_up = time.monotonic() + 10
        while not any(c.startswith(first) for c in ran) and time.monotonic() < give_up:
            now = sampler.sample()
            working(last, now, ran)
            last = now
            time.sleep(0.01)
        seen = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.3)
            now = sampler.sample()
            seen.append(working(last, now, ran))
            last = now
        return seen
    finally:
        proc.kill()
        proc.wait()


def test_a_retry_loop_of_sleeps_is_no_work_and_new_commands_are():
    # a wrapper waiting for what never comes: a new `sleep` every 0.1 s, the same command each time
    assert not any(_progress_over("until test -e /nonexistent/ready; do sleep 0.1; done", 2.5))
    # a build running a new command each time (as ninja runs the compiler on each file)
    assert any(_progress_over("for i in $(seq 100); do sleep 0.$i; done", 2.5))


def test_a_stopped_tree_is_told_from_a_running_one(tmp_path):
    log = tmp_path / "s.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", "echo loading weights; kill -STOP $$; sleep 30"], stdout=out)
    try:
        time.sleep(0.5)
        verdict = Watch(log=str(log), pid=proc.pid, stall=1).run()
        assert verdict.outcome == "stalled" and STOPPED_NOTE in verdict.notes
        proc.send_signal(signal.SIGCONT)
        assert not TreeSampler(proc.pid).stopped()
    finally:
        proc.kill()
        proc.wait()
