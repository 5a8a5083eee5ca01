"""The Slurm scheduler as a source of evidence.

Its commands' plain formats are read by name, never by position: the header
of ``squeue -o``/``sacct -P`` output names the columns, ``scontrol -o`` writes
``Key=Value`` pairs. These read the same from Slurm 21.08 to 25.11, while the
``--json`` schemas change every release.

A :class:`JobPoller` asks ``squeue`` at most once per ``every`` seconds and
turns what changed into signals for the judge: ``queued`` (with the reason),
``running`` (an attempt started), ``requeued`` (a new attempt under the same
job id), and, for what ends a start, a ``fatal`` or ``exit`` signal whose line
says what the scheduler said. Those lines are read by the generic pack's
``slurm-*`` rules, which carry each cause's explanation and remedy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import registry, rules
from .._exceptions import InputError, SlurmError, SSHError
from ..signals import Signal
from .ssh import REMOTE_STATE, Channel, Host, TailSource

POLL_EVERY = 2.0  # at most one squeue per job this often
# A job just submitted has no scheduler's reason yet (it reads None or
# PartitionConfig): its first poll waits this long.
FIRST_POLL = 1.0
# slurmctld may defer a batch job's first scheduling by batch_sched_delay
# (3 s by default; measured here: the reason came 0.4-3.0 s after sbatch), so
# while a just-submitted job is pending, no poll falls inside that window.
SCHEDULED_WITHIN = 3.3
# Reasons a pending job waits on that will never clear by themselves.
NEVER_REASONS = {
    "PartitionNodeLimit", "PartitionTimeLimit", "DependencyNeverSatisfied", "JobHeldUser", "JobHeldAdmin",
    "BadConstraints", "InvalidAccount", "InvalidQOS", "PartitionInactive",
}
_PER_JOB_LIMIT = re.compile(r"^(?:QOS|Assoc)Max\w*Per(?:Job|Node)\w*$")
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
         "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
SQUEUE_FORMAT = "%i|%T|%r|%N|%P|%l|%j"
SACCT_FIELDS = "JobID,State,ExitCode,DerivedExitCode,NodeList,Elapsed,MaxRSS,Partition"
# How long sacct may lag behind squeue for a job that just ended.
SACCT_WAIT = 5.0


class Commands:
    """Runs the scheduler's commands on this machine."""

    where = "here"
    host: str | None = None  # the login node the commands run on

    def run(self, argv: Sequence[str], stdin: str | None = None, timeout: float = 30) -> str:
        """The command's output; SlurmError with its own message if it failed."""
        code, stdout, stderr = self.execute(list(argv), stdin, timeout)
        if code is None:
            raise SlurmError(f"{argv[0]} did not answer in {timeout:.0f} s")
        if code == 127:
            raise SlurmError(f"{argv[0]} not found {self.where}: is Slurm installed {self.where}?")
        if code != 0:
            lines = [line for line in stderr.strip().splitlines() if line.strip()]
            raise SlurmError(lines[-1] if lines else f"{argv[0]} exited {code}")
        return stdout

    def execute(self, argv: list[str], stdin: str | None, timeout: float) -> tuple[int | None, str, str]:
        """(exit status, None if it timed out, 127 if not installed; stdout; stderr)."""
        if shutil.which(argv[0]) is None:
            return 127, "", ""
        try:
            out = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "", ""
        return out.returncode, out.stdout, out.stderr

    def default_folder(self) -> str:
        return str(registry.state_dir() / "logs")

    def follow(self, path: str) -> TailSource | None:
        """A source for a log of the job that is not on this machine (None: read it here)."""
        return None

    def make_folder(self, path: str) -> str:
        """Create the logs' folder and check that it can be written to; its absolute path.
        Slurm cannot create a missing output folder: the job then fails (0:53) with no log anywhere."""
        folder = Path(path).expanduser().absolute()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create the log folder {folder}: {e.strerror}") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"cannot write to the log folder {folder}")
        return str(folder)

    def folder_exists(self, path: str) -> bool:
        return os.path.isdir(path)

    def close(self) -> None:
        pass


class LoginNode(Commands):
    """Runs them on a login node, through the agent at the other end of one
    SSH connection, which also carries the job's logs."""

    def __init__(self, host: Host, ssh_args: Sequence[str] = ()):
        self.channel = Channel(host, list(ssh_args))
        self.host = str(host)
        self.where = f"on {host}"

    def execute(self, argv: list[str], stdin: str | None, timeout: float) -> tuple[int | None, str, str]:
        return self.channel.run(argv, stdin, timeout)

    def default_folder(self) -> str:
        return f"{REMOTE_STATE}/logs"

    def follow(self, path: str) -> TailSource:
        return self.channel.follow(path)

    def make_folder(self, path: str) -> str:
        # The agent runs in the home folder: ~/x is x there, and pwd says where that is.
        relative = path[2:] if path.startswith("~/") else path
        code, stdout, stderr = self.execute(
            ["sh", "-c", 'mkdir -p -- "$1" && cd -- "$1" && test -w . && pwd', "sh", relative], None, 30)
        if code != 0:
            raise InputError(f"cannot create or write to the log folder {path} {self.where}: "
                             f"{stderr.strip().splitlines()[-1] if stderr.strip() else 'not writable'}")
        return stdout.strip()

    def folder_exists(self, path: str) -> bool:
        return self.execute(["test", "-d", path], None, 30)[0] == 0

    def close(self) -> None:
        self.channel.close()


def commands_for(host: str | None, ssh_args: Sequence[str] = ()) -> Commands:
    """Where a job's commands run: here, or on its login node ([user@]host[:port])."""
    return LoginNode(Host.parse(host), ssh_args) if host else Commands()


# -- plain output, read by name ------------------------------------------------

def parse_table(text: str) -> list[dict[str, str]]:
    """``|``-separated rows under a header line (``squeue -o``, ``sacct -P``)."""
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    return [dict(zip(header, row)) for row in rows[1:]]


_KEY = re.compile(r"(?:^|\s)([A-Za-z][\w:/.()]*)=")


def parse_scontrol(text: str) -> dict[str, str]:
    """One ``scontrol -o show job|node`` record: ``Key=Value`` pairs, values may hold spaces."""
    text = text.strip().splitlines()[0] if text.strip() else ""
    keys = list(_KEY.finditer(text))
    out = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(text)
        out[m.group(1)] = text[m.end():end].strip()
    return out


def expand_nodes(spec: str) -> list[str]:
    """``n[1-2],gpu[01-03,07]`` → ``['n1', 'n2', 'gpu01', 'gpu02', 'gpu03', 'gpu07']``."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", spec or ""):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            out.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{n:0{len(lo)}d}")
    return out


def exit_code(text: str) -> int:
    """Slurm's ``code:signal`` as a shell would report it."""
    code, _, sig = (text or "0:0").partition(":")
    return 128 + int(sig) if sig.isdigit() and int(sig) else int(code or 0)


def never_clears(reason: str) -> bool:
    return reason in NEVER_REASONS or bool(_PER_JOB_LIMIT.match(reason))


@dataclass
class JobInfo:
    """What firedup knows of a job: for the views, the run record and the ledger."""
    id: str
    name: str = ""
    state: str = ""
    reason: str = ""
    partition: str = ""
    nodes: list[str] = field(default_factory=list)
    time_limit: str = ""
    restarts: int = 0
    queued: float | None = None  # seconds the current attempt waited in the queue

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.id, "state": self.state, "partition": self.partition, "nodes": self.nodes,
                "restarts": self.restarts, "queue_wait": None if self.queued is None else round(self.queued, 3)}


def squeue(commands: Commands, job: str) -> dict[str, str] | None:
    """The job's row (any state, while slurmctld remembers it: MinJobAge), or None."""
    try:
        rows = parse_table(commands.run(["squeue", "-t", "all", "-j", job, "-o", SQUEUE_FORMAT]))
    except SlurmError as e:
        if "Invalid job id" in str(e):
            return None
        raise
    return next((r for r in rows if r.get("JOBID") == job), None)


def scontrol_job(commands: Commands, job: str) -> dict[str, str]:
    return parse_scontrol(commands.run(["scontrol", "-o", "show", "job", job]))


def sacct(commands: Commands, job: str) -> list[dict[str, str]]:
    return parse_table(commands.run(["sacct", "-P", "-j", job, "-o", SACCT_FIELDS]))


def node_address(commands: Commands, node: str) -> str:
    """How to reach a node from here: its NodeAddr (what Slurm itself uses)."""
    info = parse_scontrol(commands.run(["scontrol", "-o", "show", "node", node]))
    return info.get("NodeAddr") or info.get("NodeHostName") or node


def _unavailable_nodes_down(commands: Commands, reason: str) -> bool:
    """ReqNodeNotAvail clears when the node comes back: it cannot while it is down or drained."""
    m = re.search(r"UnavailableNodes:(\S+)", reason)
    if not m:
        return False
    states = commands.run(["sinfo", "-h", "-N", "-n", m.group(1), "-o", "%T"]).split()
    return bool(states) and all(re.match(r"(down|drain|fail)", s) for s in states)


def rule_for(line: str) -> rules.Rule | None:
    """The generic pack's rule that reads a line firedup wrote for the scheduler."""
    for rule in rules.load().packs["generic"].rules:
        if rule.id.startswith("slurm-") and rule.pattern.search(line):
            return rule
    return None


def scheduler_signal(kind: str, line: str, **data: Any) -> Signal:
    return Signal(kind, line=line, rule=rule_for(line), origin="slurm", data=data)


def rejected(message: str) -> Signal:
    """A submit that sbatch refused, as the judge's fatal line."""
    return scheduler_signal("fatal", f"sbatch: error: {message.removeprefix('sbatch: error: ')}")


def _assigned(nodelist: str) -> list[str]:
    """The nodes a NodeList names (sacct says "None assigned" for a job that never ran)."""
    return expand_nodes(nodelist) if nodelist and nodelist != "None assigned" else []


class JobPoller:
    """The scheduler's view of one job, as signals, at most one squeue per ``every`` seconds."""

    def __init__(self, commands: Commands, job: str, *, every: float = POLL_EVERY, first: float = 0.0,
                 submitted: bool = False, clock=time.monotonic):
        self.commands = commands
        self.info = JobInfo(job)
        self.every = every
        self.clock = clock
        self.next_at = clock() + first
        self._scheduled_by = clock() + SCHEDULED_WITHIN if submitted else None
        self._pending_since: float | None = None
        self._ended_at: float | None = None
        self.ended = False
        self.polls = 0

    def poll(self) -> list[Signal]:
        """Signals for what changed since the last poll; [] when it is not time yet."""
        now = self.clock()
        if self.ended or now < self.next_at:
            return []
        self.next_at = now + self.every
        self.polls += 1
        row = squeue(self.commands, self.info.id)
        if row is None:  # slurmctld forgot it (MinJobAge passed): sacct knows how it ended
            return self._ended(now, None)
        info = self.info
        state, reason = row["STATE"], row["REASON"]
        info.name, info.partition, info.time_limit = row["NAME"], row["PARTITION"], row["TIME_LIMIT"]
        out: list[Signal] = []
        if state == "PENDING":
            if self._scheduled_by is not None and now < self._scheduled_by:
                self.next_at = max(self.next_at, self._scheduled_by)
            if info.state in ("RUNNING", "COMPLETING", "CONFIGURING") or (info.state and info.state in ENDED):
                out.append(self._requeued(now))
            if self._pending_since is None:
                self._pending_since = now
            if reason != info.reason or state != info.state:
                out += self._pending(reason)
        elif state in ("RUNNING", "CONFIGURING", "COMPLETING") and info.state not in ("RUNNING", "COMPLETING"):
            if info.state in ENDED:  # ended and requeued between two polls
                out.append(self._requeued(now))
            info.nodes = expand_nodes(row["NODELIST"])
            if self._pending_since is not None or info.queued is None:
                info.queued = now - self._pending_since if self._pending_since is not None else 0.0
            self._pending_since = None
            detail = scontrol_job(self.commands, info.id)
            info.restarts = int(detail.get("Restarts") or 0)
            out.append(Signal("running", line=f"slurm: job {info.id} running on {row['NODELIST']}",
                              origin="slurm", data={"nodes": info.nodes, "restarts": info.restarts}))
        info.state, info.reason = state, reason
        if state in ENDED:
            out += self._ended(now, row)
        return out

    def _pending(self, reason: str) -> list[Signal]:
        info = self.info
        queued = Signal("queued", line=f"slurm: job {info.id} pending ({reason})", origin="slurm",
                        data={"reason": reason})
        if never_clears(reason) or (reason.startswith("ReqNodeNotAvail")
                                    and _unavailable_nodes_down(self.commands, reason)):
            self.ended = True
            # it waited (phase queued), and will wait for ever
            return [queued, scheduler_signal("fatal", f"slurm: job {info.id} pending ({reason}), which will never "
                                                      "clear", reason=reason)]
        return [queued]

    def catch_up(self) -> None:
        """The job's nodes (and state), asked once more, for a job that ran and
        was read to its verdict (a server ready within a second) before a poll
        saw it running: its log said so first."""
        if self.info.nodes:
            return
        try:
            row = squeue(self.commands, self.info.id)
            nodes = _assigned(row["NODELIST"] if row is not None else next(
                (r["NodeList"] for r in sacct(self.commands, self.info.id) if r["JobID"] == self.info.id), ""))
            if row is not None and row["STATE"] in ("RUNNING", "COMPLETING", "CONFIGURING") \
                    and self.info.state not in ENDED:
                self.info.state = row["STATE"]
                self.info.restarts = int(scontrol_job(self.commands, self.info.id).get("Restarts") or 0)
        except (SlurmError, SSHError):
            return  # the verdict stands; the job's nodes stay unknown
        self.info.nodes = nodes

    def _requeued(self, now: float) -> Signal:
        self.info.restarts += 1
        self._pending_since = now
        return Signal("requeued", line=f"slurm: job {self.info.id} requeued (attempt {self.info.restarts + 1})",
                      origin="slurm", data={"restarts": self.info.restarts})

    def _ended(self, now: float, row: dict[str, str] | None) -> list[Signal]:
        """The end of the job: sacct's lines (job and steps) decide it; a requeue may follow."""
        info = self.info
        rows = sacct(self.commands, info.id)
        job = next((r for r in rows if r["JobID"] == info.id), None)
        if job is None or job["State"].split()[0] not in ENDED:
            # accounting has not caught up yet: ask again at the next poll, for a while
            if self._ended_at is None:
                self._ended_at = now
            if now - self._ended_at < SACCT_WAIT and row is not None:
                return []
            job = {"JobID": info.id, "State": row["STATE"] if row else "UNKNOWN", "ExitCode": "0:0",
                   "DerivedExitCode": "0:0", "NodeList": row["NODELIST"] if row else ""}
        state = job["State"].split()[0]
        self.ended = True
        info.state = state
        info.nodes = info.nodes or _assigned(job.get("NodeList", ""))  # it ran and ended between two polls
        text = "|".join(job.get(k, "") for k in ("JobID", "State", "ExitCode", "DerivedExitCode", "NodeList"))
        line = f"slurm: job {info.id} ended {state} (sacct: {text})"
        if state == "COMPLETED":
            failed = [r for r in rows if r["JobID"] != info.id and r["State"].split()[0] not in ("COMPLETED",)
                      and not r["JobID"].endswith((".batch", ".extern"))]
            if failed or exit_code(job.get("DerivedExitCode", "0:0")):
                step = failed[0] if failed else job
                text = "|".join(step.get(k, "") for k in ("JobID", "State", "ExitCode", "NodeList"))
                return [scheduler_signal("fatal", f"slurm: step {step['JobID']} ended {step['State']} "
                                                  f"in a job that says COMPLETED (sacct: {text})")]
            return [Signal("exit", line=line, origin="slurm", data={"code": 0})]
        signal = scheduler_signal("fatal", line, state=state)
        if signal.rule is None:  # FAILED, CANCELLED...: the log says why; the exit code is the fact
            return [Signal("exit", line=line, origin="slurm", data={"code": exit_code(job.get("ExitCode", "0:0"))})]
        return [signal]


def submit(commands: Commands, script: str, sbatch_args: Sequence[str]) -> str:
    """``sbatch --parsable``, the script on standard input; the job id."""
    out = commands.run(["sbatch", "--parsable", *sbatch_args], stdin=script)
    return out.strip().split(";")[0]


def cancel(commands: Commands, job: str) -> None:
    commands.run(["scancel", job])
