"""How soon `firedup watch` knows, beside the seed documents' 5-second grep loop.

Measures, side by side in one run, on a log watched alone (no --pid, no
writer: the appends open and close the file):
- a ready line appended to the log → the verdict (p50, p99 over --trials):
  SGLang's, printed once serving, and uvicorn's "Application startup
  complete.", printed before the bind, which waits 0.5 s for a bind error;
- a fatal line that names no cause appended → the verdict (it waits 0.5 s of
  silence for the lines that name the cause);
- a traceback whose exception names the cause, then silence → the verdict
  (the quiet period: 2 s);
and:
- the watched process exiting → the verdict;
- a ready line appended to a log on a remote host (an sshd of its own on 127.0.0.1) →
  the verdict of `firedup watch ssh://...`, and how many SSH connections the watch used;
- CPU used by firedup while it watches a silent server (log + pid) for --idle seconds;
- with a Slurm cluster running (scripts/slurm-cluster.sh start): a job's server printing its ready
  line (and answering its health probe) → the verdict of `firedup launch --slurm`, here and through
  the sshd as login node (`--host`, with the SSH connections it used), and how many squeue calls
  firedup made per 2 s.

    python benchmarks/latency.py [--trials 50] [--idle 60]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from sshd import Sshd  # noqa: E402  the tests' throw-away sshd

STARTUP = ("INFO 11-29 10:06:01 [api_server.py:1896] vLLM API server version 0.32.0\n"
           "(EngineCore pid=7) INFO 11-29 10:06:05 [gpu_model_runner.py:1] Starting to load model m...\n")
READY = "(APIServer pid=6) INFO:     Application startup complete.\n"
SGLANG_STARTUP = "[2025-04-09 05:05:13] server_args=ServerArgs(model_path='m', tp_size=1)\n"
FIRED_UP = "[2025-04-09 05:05:21] The server is fired up and ready to roll!\n"
CUDNN = ("Traceback (most recent call last):\n"
         '  File "/x/launch_server.py", line 1, in <module>\n'
         "RuntimeError: cuDNN version incompatibility: PyTorch was compiled against cuDNN 9.8 but the system "
         "runtime is cuDNN 9.6\n")
FATAL = ("(APIServer pid=6) Traceback (most recent call last):\n"
         '(APIServer pid=6)   File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core_client.py", line 9, in f\n'
         "(APIServer pid=6)     raise RuntimeError(\n"
         "(APIServer pid=6) RuntimeError: Engine core initialization failed. See root cause above. "
         "Failed core proc(s): {'EngineCore': 1}\n")
# The loop of the seed documents, as they ran it (one log check every 5 s).
GREP_LOOP = ('for i in $(seq 1 120); do '
             'if grep -q "Application startup complete\\|fired up" "$1"; then echo READY; break; fi; '
             'if grep -qi "error\\|traceback" "$1"; then echo ERROR; break; fi; sleep 5; done')


def firedup_watch(log: Path, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "watch", "--json", "--stall", "600", *extra, str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdout.readline()  # the "start" event: it is following the log
    return proc


def until_verdict(proc: subprocess.Popen) -> float:
    for line in proc.stdout:
        if b'"event": "ready"' in line or b'"event": "failed"' in line:
            return time.monotonic()
    raise RuntimeError("firedup ended without a verdict")


def append(log: Path, text: str) -> float:
    """Append to the log; when the bytes were written."""
    with open(log, "a") as f:
        f.write(text)
        f.flush()
        return time.monotonic()


def trial_log_event(tmp: Path, i: int, startup: str, text: str) -> float:
    log = tmp / f"log-{i}.log"
    log.write_text(startup)
    proc = firedup_watch(log)
    time.sleep(0.05)
    t0 = append(log, text)
    latency = until_verdict(proc) - t0
    proc.wait()
    return latency


def trial_remote(tmp: Path, i: int, sshd: Sshd) -> tuple[float, int]:
    log = tmp / f"remote-{i}.log"
    log.write_text(SGLANG_STARTUP)
    env = {**os.environ, "FIREDUP_SSH_ARGS": f"-F {sshd.config}"}
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "watch", "--json", "--stall", "600",
                             f"ssh://testhost{log}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    for line in proc.stdout:  # until the remote side is following the log
        if b'"event": "following"' in line:
            break
    connections = len(sshd.children())
    t0 = append(log, FIRED_UP)
    latency = until_verdict(proc) - t0
    proc.wait()
    return latency, connections


def trial_exit(tmp: Path, i: int) -> float:
    log = tmp / f"exit-{i}.log"
    log.write_text(STARTUP)
    server = subprocess.Popen(["sleep", "600"])
    proc = firedup_watch(log, "--pid", str(server.pid))
    time.sleep(0.05)
    t0 = time.monotonic()
    server.send_signal(signal.SIGKILL)
    latency = until_verdict(proc) - t0
    server.wait()
    proc.wait()
    return latency


def grep_trials(tmp: Path, n: int, text: str) -> list[float]:
    """n grep loops at once (they mostly sleep); the line lands at a random point of their 5 s cycle."""
    results: list[float] = [0.0] * n

    def one(i: int) -> None:
        log = tmp / f"grep-{i}.log"
        log.write_text(STARTUP)
        loop = subprocess.Popen(["bash", "-c", GREP_LOOP, "grep-loop", str(log)], stdout=subprocess.PIPE)
        time.sleep(0.1 + 5.0 * i / n)
        with open(log, "a") as f:
            f.write(text)
        t0 = time.monotonic()
        loop.stdout.readline()
        results[i] = time.monotonic() - t0
        loop.kill()
        loop.wait()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def idle_cpu(tmp: Path, seconds: float) -> float:
    log = tmp / "idle.log"
    log.write_text(STARTUP)
    server = subprocess.Popen(["sleep", str(seconds + 60)])
    proc = firedup_watch(log, "--pid", str(server.pid))
    time.sleep(2)
    before = cpu_seconds(proc.pid)
    time.sleep(seconds)
    used = cpu_seconds(proc.pid) - before
    proc.kill()
    server.kill()
    proc.wait()
    server.wait()
    return 100 * used / seconds


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


# A job's server: health 503 until the trigger file appears, then 200 and the ready line, whose
# CLOCK_MONOTONIC time it writes down (the job runs on this host: the same clock).
SLURM_SERVER = """
import http.server, os, sys, threading, time
port, trigger, stamp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
print("INFO 11-29 10:06:01 [api_server.py:1896] vLLM API server version 0.32.0", flush=True)
ready = threading.Event()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if ready.is_set() else 503); self.end_headers()
    def log_message(self, *a): pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
threading.Thread(target=server.serve_forever, daemon=True).start()
while not os.path.exists(trigger): time.sleep(0.01)
ready.set()
print("(APIServer pid=6) INFO:     Application startup complete.", flush=True)
t = time.monotonic()
open(stamp, "w").write(repr(t))
time.sleep(600)
"""


def trial_slurm(tmp: Path, i: int, sshd: Sshd | None = None) -> tuple[float, int]:
    """A job's ready line → the verdict, in seconds; and the SSH connections
    used, with the sshd as login node."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trigger, stamp = tmp / f"slurm-go-{i}", tmp / f"slurm-stamp-{i}"
    login = ["--host", "testhost"] if sshd else []
    env = {**os.environ, "FIREDUP_SSH_ARGS": f"-F {sshd.config}"} if sshd else None
    proc = subprocess.Popen([sys.executable, "-m", "firedup", "launch", "--slurm", *login, "--json", "--name",
                             f"lat{i}", "--log-dir", str(tmp / "slurm-logs"), "--url", f"http://127.0.0.1:{port}",
                             "--", sys.executable, "-c", SLURM_SERVER, str(port), str(trigger), str(stamp)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    for line in proc.stdout:
        if b'"event": "running"' in line:
            break
    connections = len(sshd.children()) if sshd else 0
    time.sleep(1.0)
    trigger.touch()
    verdict_at = until_verdict(proc)
    proc.wait()
    subprocess.run([sys.executable, "-m", "firedup", "stop", f"lat{i}"], capture_output=True, env=env)
    ready_at = float(stamp.read_text())
    return verdict_at - ready_at, connections


def squeue_gaps(tmp: Path) -> list[float]:
    """Seconds between the squeue calls of a job's watch, stamped by a wrapper first on PATH."""
    bin_dir = tmp / "count-bin"
    bin_dir.mkdir(exist_ok=True)
    count = tmp / "squeue-calls"
    real = subprocess.run(["sh", "-c", "command -v squeue"], capture_output=True, text=True).stdout.strip()
    (bin_dir / "squeue").write_text(f"#!/bin/sh\ndate +%s.%N >> {count}\nexec {real} \"$@\"\n")
    (bin_dir / "squeue").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run([sys.executable, "-m", "firedup", "launch", "--slurm", "--json", "--name", "rate",
                    "--log-dir", str(tmp / "slurm-logs"), "--stall", "20", "--kill-on-stall", "--", "sleep", "600"],
                   env=env, capture_output=True)
    stamps = [float(t) for t in count.read_text().split()]
    return [b - a for a, b in zip(stamps, stamps[1:])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--slurm-trials", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        os.environ["FIREDUP_LEDGER"] = str(tmp / "ledger.db")  # the watches' runs stay out of the user's ledger
        rows = []
        for name, startup, text in (("ready line appended (SGLang's fired-up)", SGLANG_STARTUP, FIRED_UP),
                                    ("ready line printed before the bind (uvicorn)", STARTUP, READY),
                                    ("fatal line naming no cause appended", STARTUP, FATAL),
                                    ("traceback naming the cause, then silence", SGLANG_STARTUP, CUDNN)):
            ours = [trial_log_event(tmp, i, startup, text) for i in range(args.trials)]
            theirs = grep_trials(tmp, args.trials, text)
            rows.append((name, ours, theirs))
        exits = [trial_exit(tmp, i) for i in range(args.trials)]
        sshd = Sshd(tmp / "sshd-root")
        (tmp / "sshd-root").mkdir()
        sshd.start()
        slurm = shutil.which("sinfo") and subprocess.run(["sinfo", "-h"], capture_output=True).returncode == 0
        try:
            remote = [trial_remote(tmp, i, sshd) for i in range(args.trials)]
            if slurm:
                jobs = [trial_slurm(tmp, i)[0] for i in range(args.slurm_trials)]
                login = [trial_slurm(tmp, args.slurm_trials + i, sshd) for i in range(args.slurm_trials)]
        finally:
            sshd.stop()
        cpu = idle_cpu(tmp, args.idle)
        if slurm:
            gaps = squeue_gaps(tmp)

    print(f"\n{args.trials} trials each; milliseconds; the log watched alone except for the process exit\n")
    print("| event → verdict | firedup p50 | firedup p99 | 5-second grep loop p50 | grep loop p99 |")
    print("|---|---:|---:|---:|---:|")
    for name, ours, theirs in rows:
        print(f"| {name} | {1000 * pct(ours, 50):.1f} | {1000 * pct(ours, 99):.1f} | "
              f"{1000 * pct(theirs, 50):.0f} | {1000 * pct(theirs, 99):.0f} |")
    print(f"| process exit | {1000 * pct(exits, 50):.1f} | {1000 * pct(exits, 99):.1f} | never (the loop reads "
          f"only the log: 600 s timeout) | never |")
    latencies = [r[0] for r in remote]
    print("| ready line appended on a remote host (ssh://, loopback; SGLang's fired-up) | "
          f"{1000 * pct(latencies, 50):.1f} | "
          f"{1000 * pct(latencies, 99):.1f} | | |")
    if slurm:
        print(f"| a Slurm job's ready line (launch --slurm, {len(jobs)} jobs) | {1000 * pct(jobs, 50):.1f} | "
              f"{1000 * pct(jobs, 99):.1f} | | |")
        print(f"| the same through a login node (launch --slurm --host, loopback sshd) | "
              f"{1000 * pct([r[0] for r in login], 50):.1f} | {1000 * pct([r[0] for r in login], 99):.1f} | | |")
    print(f"\nSSH connections per remote watch: {sorted({r[1] for r in remote})}")
    if slurm:
        print(f"SSH connections per Slurm job through the login node: {sorted({r[1] for r in login})}")
    if slurm:
        print(f"\nsqueue calls while a silent job was watched for 20 s: {len(gaps) + 1}, "
              f"at least {min(gaps):.2f} s apart (median {statistics.median(gaps):.2f} s)")
    print(f"\nCPU of `firedup watch LOG --pid PID` on a silent server for {args.idle:.0f} s: {cpu:.2f}% of one core")


if __name__ == "__main__":
    main()
