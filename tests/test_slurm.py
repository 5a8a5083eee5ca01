"""Slurm: the scheduler's plain output read by name, the judge's queued phase
with a fake clock, and real jobs on a real two-node cluster
(scripts/slurm-cluster.sh: two slurmd on this host, cgroup memory
enforcement, accounting), each with its verdict and cause."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from firedup import diagnose, slurm
from firedup.judge import Judge
from firedup.ledger.store import Ledger
from firedup.signals import Signal
from firedup.sources import slurm as source

from . import slurmd
from .conftest import assert_measured, run_cli
from .test_servers import MODEL, TF, Recorder, broken_copy, free_port, need, tf

# -- plain output, no cluster needed -------------------------------------------------


def test_tables_are_read_by_their_header_not_by_position():
    text = "JobID|State|ExitCode|DerivedExitCode|NodeList\n12|COMPLETED|0:0|7:0|n[1-2]\n12.0|FAILED|7:0||n[1-2]\n"
    rows = source.parse_table(text)
    assert rows[0]["DerivedExitCode"] == "7:0" and rows[1]["State"] == "FAILED"


def test_scontrol_values_may_hold_spaces_and_equal_signs():
    line = ("JobId=3 JobName=my job JobState=PENDING Reason=ReqNodeNotAvail,_UnavailableNodes:n2 "
            "Command=/x/run.sh --a=1 WorkDir=/home/a b StdOut=/logs/a b/x-3.log Restarts=2")
    info = source.parse_scontrol(line)
    assert info["JobName"] == "my job" and info["StdOut"] == "/logs/a b/x-3.log" and info["Restarts"] == "2"
    assert info["Command"] == "/x/run.sh --a=1"


def test_node_lists_expand_in_order():
    assert source.expand_nodes("n[1-2]") == ["n1", "n2"]
    assert source.expand_nodes("gpu[08-10,12],login") == ["gpu08", "gpu09", "gpu10", "gpu12", "login"]


@pytest.mark.parametrize("reason, never", [("Resources", False), ("Priority", False), ("BeginTime", False),
                                           ("PartitionNodeLimit", True), ("DependencyNeverSatisfied", True),
                                           ("JobHeldUser", True), ("QOSMaxNodePerJobLimit", True)])
def test_reasons_that_never_clear(reason, never):
    assert source.never_clears(reason) is never


def test_exit_codes_read_like_a_shell():
    assert source.exit_code("7:0") == 7 and source.exit_code("0:9") == 137 and source.exit_code("0:0") == 0


def test_time_limits_in_slurm_format():
    assert slurm._seconds("10:00") == 600 and slurm._seconds("1:00:00") == 3600
    assert slurm._seconds("2-00:00:00") == 172800 and slurm._seconds("UNLIMITED") is None


def test_a_time_limit_says_how_far_loading_had_got():
    log = ("INFO 10-01 22:24:54 [api_server.py:1896] vLLM API server version 0.10.2\n"
           "Loading safetensors checkpoint shards:  75% Completed | 48/64 [09:58<03:19, 12.5s/it]\n"
           "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2026-12-01T02:40:11 DUE TO TIME LIMIT ***\n")
    verdict = diagnose(io.BytesIO(log.encode()))
    assert verdict.cause == "time_limit"
    assert slurm.reached(verdict, "10:00") == ("The model was still loading, 48/64 (Loading safetensors checkpoint "
                                               "shards), when the 10 min limit hit.")


def test_the_stall_clock_does_not_run_while_queued_and_the_wait_is_recorded():
    judge = Judge(now=0.0, stall=10)
    judge.feed(Signal("queued", data={"reason": "Resources"}), 1.0)
    assert judge.phase == "queued" and judge.decide(500.0) is None
    judge.feed(Signal("running", data={"nodes": ["n1"]}), 600.0)
    assert judge.phase == "init" and judge.decide(609.0) is None
    verdict = judge.decide(611.0)
    assert verdict.outcome == "stalled" and verdict.phases["queued"] == 600.0


def test_a_timeout_while_queued_says_the_job_never_started():
    # --timeout 6 on a job that never left the queue: no "progress in the stall window" (s15 N5)
    judge = Judge(now=0.0, stall=300, timeout=6)
    judge.feed(Signal("queued", line="slurm: job 7 pending (Resources)", data={"reason": "Resources"}), 1.0)
    v = judge.decide(6.5)
    assert v.outcome == "timeout" and v.phase == "queued" and v.evidence["line"] == "slurm: job 7 pending (Resources)"
    assert "still queued (reason: Resources)" in v.explanation and "progress" not in v.explanation


def test_a_requeued_job_is_read_as_a_new_attempt():
    judge = Judge(now=0.0, stall=10)
    judge.feed(Signal("running"), 1.0)
    judge.feed(source.rejected("Batch job submission failed: x"), 2.0)  # a failure of the first attempt
    judge.feed(Signal("requeued", data={"restarts": 1}), 3.0)
    assert judge.phase == "queued" and judge.decide(4.0) is None


class Scheduler(source.Commands):
    """squeue's answers as a just-submitted job's reason changes at given times (a fake clock)."""

    def __init__(self, reasons):
        self.now, self.reasons, self.asked = 0.0, reasons, []

    def execute(self, argv, stdin, timeout):
        self.asked.append(self.now)
        reason = [r for t, r in self.reasons if t <= self.now][-1]
        return 0, f"JOBID|STATE|REASON|NODELIST|PARTITION|TIME_LIMIT|NAME\n7|PENDING|{reason}||debug|1:00|x\n", ""


def run_poller(scheduler, poller, until):
    verdicts = []
    while scheduler.now <= until and not poller.ended:
        verdicts += poller.poll()
        scheduler.now = round(scheduler.now + 0.1, 1)
    return verdicts


def test_a_reason_that_comes_late_in_the_first_scheduling_delay_is_seen_just_after_it():
    # slurmctld set the reason 2.9 s after sbatch (measured 0.4-3.0 s): a poll at 3.0 s would race it
    scheduler = Scheduler([(0.0, "PartitionConfig"), (2.9, "PartitionNodeLimit")])
    poller = source.JobPoller(scheduler, "7", every=2.0, first=1.0, submitted=True, clock=lambda: scheduler.now)
    signals = run_poller(scheduler, poller, 10)
    assert scheduler.asked == [1.0, 3.3] and poller.ended
    assert signals[-1].kind == "fatal" and "PartitionNodeLimit" in signals[-1].line


def test_a_reason_that_never_clears_fails_a_job_that_was_queued():
    # --nodes 3 on a two-node partition: it never ran, so its phase is queued, not init (W2 of round s15)
    scheduler = Scheduler([(0.0, "PartitionNodeLimit")])
    poller = source.JobPoller(scheduler, "7", every=2.0, clock=lambda: scheduler.now)
    judge = Judge(now=0.0, stall=10)
    for s in poller.poll():
        judge.feed(s, 0.5)
    v = judge.decide(1.0)
    assert v.outcome == "failed" and v.cause == "scheduler_rejected" and v.phase == "queued", v
    assert list(v.phases) == ["queued"]


def test_a_log_line_says_a_job_runs_before_squeue_does():
    # the poller saw it pending; the job ran and failed before the next poll: not a failure in the queue
    from firedup.engine import Engine
    engine, judge = Engine(), Judge(now=0.0, stall=10)
    judge.feed(Signal("queued", data={"reason": "None"}), 1.0)
    for s in engine.feed(b"FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent.gguf'\n") \
            + engine.close():
        judge.feed(s, 2.0)
    judge.feed(Signal("exit", origin="slurm", data={"code": 1}), 3.0)
    v = judge.decide(3.0)
    assert v.outcome == "failed" and v.phase == "init" and v.phases == {"queued": 2.0, "init": 1.0}, v


def test_stop_of_a_job_that_already_ended_says_so_and_cancels_nothing(monkeypatch):
    from firedup import _servers, registry
    registry.Record(name="sl1", pid=0, argv=["serve"], log="x.log", url=None, server=None, started=time.time(),
                    created=0.0, job="188", stopped=time.time()).save()
    monkeypatch.setattr(slurm, "state", lambda job, host=None, ssh_args=(): "CANCELLED")
    monkeypatch.setattr(slurm, "stop", lambda *a: pytest.fail("scancel of an ended job"))
    assert _servers.stop("sl1") == "sl1: job 188 had already ended (CANCELLED), nothing to cancel"


class Ran(source.Commands):
    """A job that squeue shows running on n2 (the poller never saw it so)."""

    def execute(self, argv, stdin, timeout):
        if argv[0] == "squeue":
            return 0, "JOBID|STATE|REASON|NODELIST|PARTITION|TIME_LIMIT|NAME\n7|RUNNING|None|n2|debug|1:00|x\n", ""
        return 0, "JobId=7 JobState=RUNNING Restarts=0 NodeList=n2\n", ""


def test_a_job_read_to_its_verdict_before_a_poll_saw_it_run_gets_its_nodes_after():
    poller = source.JobPoller(Ran(), "7")
    poller.info.state = "PENDING"
    poller.catch_up()
    assert poller.info.nodes == ["n2"] and poller.info.state == "RUNNING"


def test_polls_keep_their_pace_once_the_first_scheduling_is_past_or_for_a_job_not_just_submitted():
    scheduler = Scheduler([(0.0, "Resources")])
    poller = source.JobPoller(scheduler, "7", every=2.0, first=1.0, submitted=True, clock=lambda: scheduler.now)
    run_poller(scheduler, poller, 8)
    assert scheduler.asked == [1.0, 3.3, 5.3, 7.3]
    scheduler = Scheduler([(0.0, "Resources")])
    poller = source.JobPoller(scheduler, "7", every=2.0, clock=lambda: scheduler.now)
    run_poller(scheduler, poller, 5)
    assert scheduler.asked == [0.0, 2.0, 4.0]


class Ended(source.Commands):
    """squeue and sacct for a job that has ended in ``state`` (sacct's State may say who: "CANCELLED by 0")."""

    def __init__(self, state, code="0:0"):
        self.state, self.code = state, code

    def execute(self, argv, stdin, timeout):
        short = self.state.split()[0]
        if argv[0] == "squeue":
            return 0, f"JOBID|STATE|REASON|NODELIST|PARTITION|TIME_LIMIT|NAME\n7|{short}|None|n1|debug|1:00|x\n", ""
        return 0, (f"JobID|State|ExitCode|DerivedExitCode|NodeList|Elapsed|MaxRSS|Partition\n"
                   f"7|{self.state}|{self.code}|0:0|n1|00:00:21||debug\n"), ""


def ended_while_loading(state, code="0:0", stop=True):
    """A start cut by the scheduler's end of the job: slurmstepd's stop line (scancel, preemption)
    in the log, then the poller's word on how the job ended."""
    from firedup.engine import Engine
    engine, judge = Engine(), Judge(now=0.0, stall=120)
    judge.feed(Signal("running", data={"nodes": ["n1"]}), 1.0)
    text = "INFO loading weights\n" + ("slurmstepd-n1: error: *** JOB 7 ON n1 CANCELLED AT 2026-12-05T09:16:45 ***\n"
                                       if stop else "")
    for s in engine.feed(text.encode()) + engine.close():
        judge.feed(s, 20.0)
    poller = source.JobPoller(Ended(state, code), "7")
    for s in poller.poll():
        judge.feed(s, 21.0)
    return judge.decide(21.0)


@pytest.mark.parametrize("state, code", [("CANCELLED by 0", "0:0"), ("PREEMPTED", "0:15"), ("DEADLINE", "0:0"),
                                         ("FAILED", "143:0"), ("COMPLETED", "0:0")])
def test_a_job_that_ended_before_ready_is_failed_even_after_a_stop_from_outside(state, code):
    # scancel mid-load: slurmstepd's "CANCELLED AT" line stops the start from outside, and sacct says
    # the job ended: nothing is left running to inspect, so it is no stall (W1 of round s15)
    v = ended_while_loading(state, code)
    assert v is not None and v.outcome == "failed", v
    if state.split()[0] in ("CANCELLED", "PREEMPTED", "DEADLINE"):
        assert v.evidence["line"].startswith(f"slurm: job 7 ended {state.split()[0]} (sacct: 7|{state}|")
        assert "Slurm ended the job" in v.explanation


@pytest.mark.parametrize("state, cause", [("TIMEOUT", "time_limit"), ("NODE_FAIL", "node_failure"),
                                          ("OUT_OF_MEMORY", "host_oom")])
def test_the_scheduler_states_that_name_a_cause_keep_it_after_a_stop_line(state, cause):
    v = ended_while_loading(state, stop=False)
    assert v is not None and v.outcome == "failed" and v.cause == cause, v
    v = ended_while_loading(state)
    assert v is not None and v.outcome == "failed" and v.cause == cause, v


# -- a real cluster --------------------------------------------------------------------

@pytest.fixture(scope="session")
def cluster():
    started, why = slurmd.start()
    if why is not None:
        if os.environ.get("CI"):
            raise RuntimeError(f"CI must run the Slurm tests: {why}")
        pytest.skip(why)
    yield
    if started:
        slurmd.stop()


@pytest.fixture
def env(monkeypatch):
    """What the job inherits from sbatch (--export=ALL)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


def launch(argv, tmp_path, **options):
    recorder = Recorder()
    options.setdefault("stall", 120)
    launched = slurm.launch([str(a) for a in argv], log_dir=tmp_path / "logs", sinks=[recorder], every=1.0,
                            **options)
    launched.events = recorder.events
    return launched


def job_state(job: str) -> str:
    return slurm.state(job)


def wait_ended(job: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = job_state(job)
        if state not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"job {job} still {state}")


FOLLOWER = """
if [ "$SLURM_PROCID" = 0 ]; then exec "$@"; fi
echo "worker $SLURMD_NODENAME: following the head"
[ -n "$WORKER_EXIT" ] && exit "$WORKER_EXIT"
while ! curl -s "$HEAD/health" >/dev/null; do sleep 0.5; done
echo "worker $SLURMD_NODENAME: the head answers"
exec sleep 600
"""


def two_node(tmp_path, port, **env):
    """Task 0 runs the server; task 1 follows it (or exits, or hangs, as env says)."""
    script = tmp_path / "two-node.sh"
    exports = "".join(f"export {k}={v}\n" for k, v in env.items())
    script.write_text(f"#!/bin/bash\nexport HEAD=http://127.0.0.1:{port}\n{exports}{FOLLOWER}")
    script.chmod(0o755)
    return [script, *tf(MODEL, port)]


@need(TF)
def test_one_node_tiny_model_ready_benchmarked_stopped_recorded(cluster, env, tmp_path):
    port = free_port()
    proc = run_cli("run", "--slurm", "--name", "tiny-slurm", "--log-dir", str(tmp_path / "logs"), "--stall", "120",
                   "--concurrency", "2", "--num-prompts", "4", "--input-len", "8", "--output-len", "8", "--json",
                   "--", *map(str, tf(MODEL, port)), timeout=300)
    assert_measured(proc)
    bench = json.loads(proc.stdout.decode().splitlines()[-1])
    assert bench["completed"] == 4 and bench["url"] == f"http://127.0.0.1:{port}"
    ledger = Ledger(os.environ["FIREDUP_LEDGER"])
    launch_run = ledger.find(kind="launch")[0]
    assert launch_run["outcome"] == "ready" and launch_run["scheduler"]["partition"] == "debug"
    job = launch_run["scheduler"]["job"]
    assert launch_run["scheduler"]["nodes"] == ["n1"] and launch_run["scheduler"]["queue_wait"] is not None
    assert launch_run["scheduler"]["logs"]["job"] == str(tmp_path / "logs" / f"tiny-slurm-{job}.log")
    assert wait_ended(job) == "CANCELLED"  # firedup run stopped it

    port = free_port()
    proc = run_cli("launch", "--slurm", "--name", "tiny", "--log-dir", str(tmp_path / "logs"), "--json", "--",
                   *map(str, tf(MODEL, port)), timeout=300)
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    assert proc.returncode == 0 and verdict["outcome"] == "ready" and verdict["server"] == "transformers"
    ps = json.loads(run_cli("ps", "--all", "--json").stdout)
    states = {r["name"]: (r["job"], r["job_state"], r["alive"], r["stopped"]) for r in ps}
    assert states == {"tiny-slurm": (job, "CANCELLED", False, True), "tiny": (verdict["slurm"]["job"], "RUNNING",
                                                                             True, False)}
    assert [r["name"] for r in json.loads(run_cli("ps", "--json").stdout)] == ["tiny"]  # the ended left out
    stop = run_cli("stop", "tiny")
    assert stop.returncode == 0 and b"scancel" in stop.stdout
    assert wait_ended(verdict["slurm"]["job"]) == "CANCELLED"


SERVER = """
import http.server, sys, time
print("loading", flush=True)
time.sleep(LOADING)
port = int(sys.argv[sys.argv.index("--port") + 1])
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("0.0.0.0", port), Health)
print(f"INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)", flush=True)
server.serve_forever()
"""


def health_server(loading: float) -> str:
    """A server in a few lines: it loads for ``loading`` seconds, prints uvicorn's ready line,
    then /health answers 200."""
    return SERVER.replace("LOADING", str(loading))


def test_a_job_ready_before_squeue_saw_it_run_still_has_its_node_and_url(cluster, tmp_path):
    # ready at once: the log says the job runs before any squeue does
    script = tmp_path / "fast.py"
    script.write_text(health_server(0))
    port = free_port()
    proc = run_cli("launch", "--slurm", "--name", "fast", "--log-dir", str(tmp_path / "logs"), "--json", "--",
                   sys.executable, str(script), "--port", str(port), timeout=120)
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    job = verdict["slurm"]["job"]
    try:
        assert proc.returncode == 0 and verdict["outcome"] == "ready", verdict
        assert verdict["slurm"]["nodes"] == ["n1"] and f"job {job} on n1," in verdict["note"]
        [row] = json.loads(run_cli("ps", "--json").stdout)
        assert row["url"] == f"http://127.0.0.1:{port}" and row["job_state"] == "RUNNING"
    finally:
        run_cli("stop", "fast")
    assert wait_ended(job) == "CANCELLED"
    assert json.loads(run_cli("ps", "--json").stdout) == []  # stopped: listed only by ps --all
    again = run_cli("stop", "fast")
    assert again.returncode == 0
    assert again.stdout.decode() == f"fast: job {job} had already ended (CANCELLED), nothing to cancel\n"


@need(TF)
def test_two_nodes_head_serves_and_the_second_follows(cluster, env, tmp_path):
    port = free_port()
    launched = launch(two_node(tmp_path, port), tmp_path, nodes=2, name="two")
    try:
        assert launched.verdict.outcome == "ready", launched.verdict
        assert launched.verdict.slurm["nodes"] == ["n1", "n2"]
        assert set(launched.verdict.slurm["logs"]) == {"job", "n1", "n2"}
        assert launched.verdict.evidence["line"].startswith("INFO:     Uvicorn running")
    finally:
        slurm.stop(launched.record)


@need(TF)
def test_two_nodes_second_task_exits_7_fails_naming_n2(cluster, env, tmp_path):
    launched = launch(two_node(tmp_path, free_port(), WORKER_EXIT=7), tmp_path, nodes=2, name="two7")
    v = launched.verdict
    assert v.outcome == "failed" and v.slurm["node"] == "n2", v
    assert v.evidence["line"] == "srun: error: n2: task 1: Exited with exit code 7"
    assert wait_ended(v.slurm["job"]) in ("FAILED", "CANCELLED")


RANKS = """
if [ "$SLURM_PROCID" = 1 ]; then echo "rank 1: init"; exec sleep 600; fi
while true; do echo "rank 0: waiting for rank 1 (NCCL init)"; sleep 1; done
"""


def test_a_silent_rank_is_stalled_and_named(cluster, tmp_path):
    script = tmp_path / "ranks.sh"
    script.write_text("#!/bin/bash\n" + RANKS)
    script.chmod(0o755)
    launched = launch([script], tmp_path, nodes=2, name="silent", stall=6, kill_on_stall=True)
    v = launched.verdict
    assert v.outcome == "stalled" and v.slurm["node"] == "n2", v
    assert v.evidence["line"] == "rank 1: init"
    assert wait_ended(v.slurm["job"]) == "CANCELLED"


def test_a_job_cancelled_from_outside_mid_start_is_failed_not_left_for_inspection(cluster, tmp_path):
    recorder = Recorder()
    done = {}

    def cancel_once_loading(t, name, **fields):
        recorder.event(t, name, **fields)
        if name == "running" and "job" not in done:
            done["job"] = fields["line"].split()[2]
            threading.Timer(2.0, subprocess.run, [["scancel", done["job"]]]).start()

    sink = type("Sink", (), {"event": staticmethod(cancel_once_loading), "update": lambda self, v: None})()
    launched = slurm.launch(["bash", "-c", "echo loading weights; sleep 600"], log_dir=tmp_path / "logs",
                            name="scancelled", sinks=[sink], every=1.0, stall=120)
    v = launched.verdict
    assert v.outcome == "failed" and v.slurm["state"] == "CANCELLED", v
    assert v.evidence["line"].startswith(f"slurm: job {done['job']} ended CANCELLED (sacct: {done['job']}|CANCELLED")
    assert v.elapsed < 60 and launched.note == f"job {done['job']} ended CANCELLED"
    [row] = json.loads(run_cli("ps", "--all", "--json").stdout)
    assert (row["alive"], row["stopped"], row["job_state"]) == (False, False, "CANCELLED")
    assert run_cli("ps").stdout.decode() == "(1 ended not shown: firedup ps --all)\n"


def test_ctrl_c_while_queued_cancels_the_job_and_says_so(cluster, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "launch", "--slurm", "--name", "held", "--log-dir",
                             str(tmp_path / "logs"), "--sbatch-arg=--begin=now+120", "--", "sleep", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    time.sleep(4)  # submitted, and waiting for its begin time
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    job = out.decode().split("submitted: job=")[1].split()[0]
    assert proc.returncode == 130
    assert err.decode() == f"firedup: interrupted; cancelled job {job} (scancel)\n"
    assert wait_ended(job) == "CANCELLED"


def test_over_the_memory_limit_is_host_oom(cluster, tmp_path):
    hog = "import time; print('allocating', flush=True); b = bytearray(800 << 20); time.sleep(60)"
    launched = launch([sys.executable, "-c", hog], tmp_path, name="oom", sbatch_args=["--mem=200M"])
    v = launched.verdict
    assert v.outcome == "failed" and v.cause == "host_oom", v
    assert "oom" in v.evidence["line"].lower() or "OUT_OF_MEMORY" in v.evidence["line"]


def test_three_nodes_on_a_two_node_partition_is_rejected_at_once(cluster, tmp_path):
    start = time.monotonic()
    launched = launch(["sleep", "60"], tmp_path, name="three", nodes=3)
    v = launched.verdict
    assert time.monotonic() - start < 5
    assert v.outcome == "failed" and v.cause == "scheduler_rejected" and "PartitionNodeLimit" in v.evidence["line"]
    assert wait_ended(v.slurm["job"]) == "CANCELLED"  # not left pending for ever


def test_a_submit_sbatch_refuses_fails_with_its_message(cluster, tmp_path):
    launched = launch(["sleep", "60"], tmp_path, name="toobig", sbatch_args=["--mem=100G"])
    v = launched.verdict
    assert v.outcome == "failed" and v.cause == "scheduler_rejected"
    assert v.evidence["line"] == ("sbatch: error: Batch job submission failed: "
                                  "Requested node configuration is not available")


def test_a_log_folder_that_cannot_be_made_is_caught_before_submit(cluster, tmp_path):
    (tmp_path / "file").write_text("")
    before = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True).stdout
    proc = run_cli("launch", "--slurm", "--log-dir", str(tmp_path / "file" / "logs"), "--", "sleep", "1")
    assert proc.returncode == 2 and proc.stderr.decode().startswith("firedup: cannot create the log folder")
    assert b"Traceback" not in proc.stderr
    after = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True).stdout
    assert after == before  # nothing submitted


def test_watch_attaches_to_a_job_someone_else_submitted(cluster, tmp_path):
    log = tmp_path / "theirs.log"
    job = subprocess.run(["sbatch", "--parsable", "-o", str(log), "--wrap", "echo starting; sleep 1; exit 3"],
                         capture_output=True, text=True, check=True).stdout.strip()
    proc = run_cli("watch", f"slurm://{job}", "--json", timeout=60)
    verdict = json.loads(proc.stdout.decode().splitlines()[-1])
    assert proc.returncode == 1 and verdict["outcome"] == "failed" and verdict["exit_code"] == 3
    assert verdict["slurm"]["job"] == job and verdict["slurm"]["logs"]["job"] == str(log)
    missing = subprocess.run(["sbatch", "--parsable", "--hold", "-o", str(tmp_path / "nowhere" / "x.log"),
                              "--wrap", "true"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        proc = run_cli("watch", f"slurm://{missing}")
        assert proc.returncode == 2 and b"whose folder does not exist" in proc.stderr
    finally:
        subprocess.run(["scancel", missing])


@need(TF)
def test_time_limit_during_a_slow_load_says_how_far_it_got(cluster, env, tmp_path):
    model = broken_copy(tmp_path, "fifo")  # a shard that never delivers: loading waits at it
    launched = launch(tf(model, free_port()), tmp_path, name="slow", sbatch_args=["--time=1"], stall=600)
    v = launched.verdict
    assert v.outcome == "failed" and v.cause == "time_limit", v
    # transformers serve prints no counter before its weights are read: the phase is how far it got
    assert v.phase == "weights" and v.explanation.startswith("The model was still loading, when the 1 min limit hit")


@need(TF)
def test_a_node_that_dies_during_a_start_is_node_failure(cluster, env, tmp_path):
    node = "n1"
    recorder = Recorder()
    result = {}

    def kill_when_running(t, name, **fields):
        recorder.event(t, name, **fields)
        if name == "running" and "killed" not in result:
            result["killed"] = os.kill(slurmd.slurmd_pid(node), signal.SIGKILL)

    recorder_sink = type("Sink", (), {"event": staticmethod(kill_when_running), "update": lambda self, v: None})()
    try:
        model = broken_copy(tmp_path, "fifo")  # a start that lasts until the node is declared dead
        launched = slurm.launch([str(a) for a in tf(model, free_port())], log_dir=tmp_path / "logs", name="dies",
                                sinks=[recorder_sink], every=1.0, stall=300,
                                sbatch_args=["--no-requeue", f"--nodelist={node}"])
        v = launched.verdict
        assert v.outcome == "failed" and v.cause == "node_failure", v
    finally:
        slurmd.restart_slurmd(node)
