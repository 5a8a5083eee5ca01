"""LLM servers as Slurm jobs: submit with ``sbatch``, follow every node's log
and the scheduler's own word to one verdict, stop with ``scancel``.

firedup writes the batch script. One node: the command runs in it, its output
in ``DIR/NAME-JOBID.log``. Several nodes: ``srun`` starts one task per node,
each with its own log ``DIR/NAME-JOBID.TASK.log``; the batch log keeps what
srun and slurmstepd say (a task's exit code, the time limit, the cgroup OOM
killer). Each log has its own watch (rules, judge); the first that fails or
stalls ends the whole job, named; ready is the head node's (task 0) ready,
with its health probe."""

from __future__ import annotations

import os
import queue
import re
import shlex
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import registry, rules
from ._exceptions import InputError, SlurmError, SSHError
from ._launch import derive_url
from .defaults import GRACE, STALL
from .judge import Judge, Verdict
from .ledger.memory import Memory
from .ledger.store import Ledger
from .signals import Signal
from .sinks import Sink
from .sources.slurm import (
    ENDED,
    FIRST_POLL,
    POLL_EVERY,
    Commands,
    JobPoller,
    cancel,
    commands_for,
    node_address,
    rejected,
    sacct,
    scontrol_job,
    squeue,
    submit,
)
from .sources.ssh import Host
from .watch import Watch

# sbatch options firedup sets itself.
OWN_OPTIONS = ("-o", "--output", "-e", "--error", "-N", "--nodes", "-J", "--job-name", "--parsable")
SCHEDULER_EVENTS = ("queued", "running", "requeued", "exit")
# Ranks whose stall windows end together are told apart by which was silent
# longest: a watch sees its window end within its poll (or its next line).
STALL_TIE = 1.5
_NODE_IN_LINE = re.compile(r"\bON (\S+) CANCELLED AT|^srun: error: ([^:\s]+):")


def target(text: str) -> tuple[str | None, str] | None:
    """``slurm://[user@]host/JOBID`` → (the login node or None, the job id); None for another kind of target."""
    if not text.startswith("slurm://"):
        return None
    host, _, job = text.removeprefix("slurm://").strip("/").rpartition("/")
    if not re.fullmatch(r"\d+(?:_\d+)?", job) or "/" in host:
        raise InputError(f"not a Slurm job: {text!r} (expected slurm://JOBID or slurm://[user@]host/JOBID)")
    if host:
        Host.parse(host)  # InputError when it is not one
    return host or None, job


@dataclass
class Log:
    label: str  # "job" (the batch log), or the node (task) it belongs to
    path: str
    head: bool = False  # the server's own log: ready is its ready
    batch: bool = False  # the scheduler's word (ended, rejected) goes to its watch


class Feed:
    """One watch's share of the scheduler's signals (the watch calls signals())."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue[Signal] = queue.SimpleQueue()

    def put(self, s: Signal) -> None:
        self._q.put(s)

    def signals(self) -> list[Signal]:
        out = []
        while True:
            try:
                out.append(self._q.get_nowait())
            except queue.Empty:
                return out


def _seconds(limit: str) -> float | None:
    """Slurm's time format ([D-]HH:MM:SS, MM:SS, M) in seconds."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", limit or "")
    if not m:
        return None
    days, a, b, c = (int(g) if g else 0 for g in m.groups())
    if m.group(4) is not None:
        return days * 86400 + a * 3600 + b * 60 + c
    if m.group(3) is not None:
        return days * 86400 + a * 60 + b if not m.group(1) else days * 86400 + a * 3600 + b * 60
    return days * 86400 + a * 60


def _human(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Follow:
    """A job followed to one verdict: the scheduler polled in one thread, a
    watch per log in others."""

    def __init__(self, commands: Commands, job: str, logs: list[Log], *, server: str | None, url: str | None,
                 port: str | None, stall: float | None, timeout: float | None, grace: float,
                 sinks: Sequence[Sink], every: float = POLL_EVERY, first: float = 0.0, submitted: bool = False):
        self.commands = commands
        self.poller = JobPoller(commands, job, every=every, first=first, submitted=submitted)
        self.logs = logs
        self.url = url
        self.port = port  # with no --url: the head node's address, this port
        self.cancel = threading.Event()
        self.feeds = [Feed() for _ in logs]
        self.watches = [
            Watch(**_source(commands, log.path), server=server, url=None,
                  stall=stall if not (log.batch and not log.head) else None, timeout=timeout, grace=grace,
                  sinks=[_Labelled(s, log.label, len(logs) > 1) for s in sinks], cancel=self.cancel, scheduler=feed)
            for log, feed in zip(logs, self.feeds)
        ]
        self.error: BaseException | None = None

    def _poll(self) -> None:
        try:
            while not self.cancel.is_set():
                for s in self.poller.poll():
                    self._route(s)
                if self.poller.ended:
                    return
                self.cancel.wait(max(0.0, self.poller.next_at - time.monotonic()))
        except BaseException as e:  # a Slurm command failing: the main thread reports it
            self.error = e
            self.cancel.set()

    def _route(self, s: Signal) -> None:
        for log, feed in zip(self.logs, self.feeds):
            if s.kind in ("queued", "requeued"):
                feed.put(s)
            elif s.kind == "running":
                if log.head and self.poller.info.nodes:
                    s = Signal(s.kind, line=s.line, origin=s.origin, data={**s.data, "url": self.head_url()})
                feed.put(s)
            elif log.batch:
                feed.put(s)

    def _silent_one(self, i: int, verdict: Verdict, results: queue.SimpleQueue) -> tuple[int, Verdict]:
        """Of the ranks that stall together (one waits, saying so in the same words, for another
        that went silent: their stall clocks started with the job), the one silent longest."""
        stalled = [(i, verdict)]
        deadline = time.monotonic() + STALL_TIE
        while (left := deadline - time.monotonic()) > 0:
            try:
                j, other = results.get(timeout=left)
            except queue.Empty:
                break
            if isinstance(other, Verdict) and other.outcome == "stalled":
                stalled.append((j, other))
            elif other is not None:
                results.put((j, other))  # a failure or an error: the caller's to read
                break
        return min(stalled, key=lambda found: self.watches[found[0]].judge.last_line_at)

    def head_url(self) -> str | None:
        """The server's URL: --url, else the head node's address with CMD's port, once the job has nodes."""
        if self.url or not (self.port and self.poller.info.nodes):
            return self.url
        try:
            return f"http://{node_address(self.commands, self.poller.info.nodes[0])}:{self.port}"
        except (SlurmError, SSHError):
            return None  # the node's address unknown: no probe, and ps shows no URL

    def run(self) -> tuple[Verdict, Log]:
        """The overall verdict and the log it rests on."""
        results: queue.SimpleQueue = queue.SimpleQueue()

        def one(i: int) -> None:
            try:
                results.put((i, self.watches[i].run()))
            except BaseException as e:
                results.put((i, e))

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(self.logs))]
        poller = threading.Thread(target=self._poll, daemon=True)
        poller.start()
        for t in threads:
            t.start()
        found: tuple[Verdict | None, Log | None] = (None, None)
        try:
            for _ in threads:
                i, verdict = results.get()
                if isinstance(verdict, BaseException):
                    raise verdict
                if verdict is None:  # cancelled: the poller failed, or another log decided
                    continue
                log = self.logs[i]
                if verdict.outcome == "stalled" and len(self.logs) > 2:
                    i, verdict = self._silent_one(i, verdict, results)
                    log = self.logs[i]
                if verdict.outcome != "ready" or log.head:
                    found = (verdict, log)
                    break
        finally:
            self.cancel.set()
            for t in threads:
                t.join(5)
            poller.join(5)
        if self.error is not None:
            raise self.error
        self.poller.catch_up()  # a job read to its verdict before a poll saw it run: its nodes all the same
        verdict, log = found
        assert verdict is not None and log is not None  # the watches ended: one of them decided
        return verdict, log


class _Labelled:
    """A sink for one of a job's logs: events carry the node's name when there are several."""

    def __init__(self, sink: Sink, label: str, several: bool):
        self.sink, self.label, self.several = sink, label, several

    def event(self, t: float, name: str, **fields) -> None:
        if self.several and self.label != "job" and (name in SCHEDULER_EVENTS or fields.get("phase") == "queued"):
            return  # the job's own watch tells these once
        if self.several:
            fields["node"] = self.label
        self.sink.event(t, name, **fields)

    def update(self, view: dict) -> None:
        if not self.several or self.label == "job":
            self.sink.update(view)

    def verdict(self, verdict: Verdict, note: str | None = None, *, target: str | None = None) -> None:
        self.sink.verdict(verdict, note, target=target)

    def close(self) -> None:
        pass


def _describe(verdict: Verdict, log: Log, follow: Follow) -> Verdict:
    """The verdict with the job's facts: the job, the node to blame, the queue wait, the logs."""
    info = follow.poller.info
    node = None
    if verdict.outcome != "ready":
        m = _NODE_IN_LINE.search((verdict.evidence or {}).get("line", ""))
        node = (m.group(1) or m.group(2)) if m else (None if log.label == "job" else log.label)
    facts = {**info.to_dict(), "node": node, "logs": {lg.label: lg.path for lg in follow.logs},
             "polls": follow.poller.polls}
    explanation = verdict.explanation
    if verdict.cause == "time_limit":
        explanation = f"{reached(verdict, info.time_limit)} {verdict.explanation}"
    return replace(verdict, slurm=facts, explanation=explanation)


def reached(verdict: Verdict, time_limit: str) -> str:
    """How far the start had got when the time limit hit, from the server's own progress."""
    limit = _seconds(time_limit)
    p = verdict.progress
    counted = f", {p['n']}/{p['total']} ({p['desc']})" if p and p.get("total") else ""
    loading = verdict.phase == "weights" or bool(p and re.search(r"shard|weight|checkpoint", p["desc"], re.I))
    what = "the model was still loading" if loading else f"it was still in phase {verdict.phase}"
    return f"{what.capitalize()}{counted}, when the {_human(limit) if limit else time_limit} limit hit."


def _source(commands: Commands, path: str) -> dict[str, Any]:
    """A Watch's log: read here, or through the login node's connection."""
    remote = commands.follow(path)
    return {"log": None, "remote": remote} if remote is not None else {"log": path}


def script(argv: Sequence[str], nodes: int, task_logs: str) -> str:
    """The batch script: the command itself, or one srun task per node with a log each."""
    command = shlex.join(argv)
    if nodes <= 1:
        return f"#!/bin/bash\nexec {command}\n"
    return (f"#!/bin/bash\nexec srun --ntasks-per-node=1 --ntasks={nodes} "
            f"--output={shlex.quote(task_logs)} --error={shlex.quote(task_logs)} {command}\n")


@dataclass
class Launched:
    record: registry.Record
    verdict: Verdict
    note: str

    def stop(self) -> str | None:
        """Cancel the job of a ready server (one that is not ready was cancelled already): what was done."""
        if not (self.record.job and self.verdict.outcome == "ready"):
            return None
        said = stop(self.record)
        self.record.stopped = time.time()
        self.record.save()
        return said


def launch(argv: Sequence[str], *, name: str | None = None, nodes: int = 1, sbatch_args: Sequence[str] = (),
           log_dir: str | os.PathLike | None = None, server: str | None = None, url: str | None = None,
           stall: float | None = STALL, timeout: float | None = None, grace: float = GRACE,
           kill_on_stall: bool = False, sinks: Sequence[Sink] = (), ledger: Ledger | None = None,
           commands: Commands | None = None, every: float = POLL_EVERY) -> Launched:
    """Submit ``argv`` as a job, follow it to a verdict; cancel it unless it is
    ready (or stalled, left for inspection unless asked)."""
    commands = commands or Commands()
    argv = list(argv)
    for arg in sbatch_args:
        if arg.split("=")[0] in OWN_OPTIONS:
            raise InputError(f"firedup sets {arg.split('=')[0]} itself (use --nodes, --name, --log-dir)")
    family = server or rules.load().detect_command(argv)
    name = name or registry.default_name(argv, family)
    directory = commands.make_folder(str(log_dir) if log_dir else commands.default_folder())
    batch_log = f"{directory}/{name}-%j.log"
    task_logs = f"{directory}/{name}-%j.%t.log"
    memory = Memory(ledger, family, argv) if ledger is not None else None
    derived = derive_url(argv, family)
    port = derived.rsplit(":", 1)[1] if derived else None
    sbatch = ["-J", name, "-o", batch_log, "-e", batch_log, f"--nodes={nodes}", *sbatch_args]
    try:
        job = submit(commands, script(argv, nodes, task_logs), sbatch)
    except SlurmError as e:
        if "not found" in str(e):
            raise InputError(str(e)) from None
        judge = Judge(now=time.monotonic(), server=family)
        judge.feed(rejected(str(e)), time.monotonic())
        decided = judge.decide(time.monotonic())
        assert decided is not None  # a rejection decides at once
        verdict = replace(decided, slurm={"job": None, "submit": str(e)})
        if memory is not None:
            verdict = memory.remember(verdict, kind="launch", name=name, log=None, environment=None,
                                      scheduler=verdict.slurm)
        return Launched(registry.Record(name=name, pid=0, argv=argv, log="", url=None, server=family,
                                 started=time.time(), created=0.0), verdict, "sbatch refused the job")
    logs = [Log("job", batch_log.replace("%j", job), head=nodes <= 1, batch=True)]
    if nodes > 1:
        logs += [Log(f"task {t}", task_logs.replace("%j", job).replace("%t", str(t)), head=t == 0)
                 for t in range(nodes)]
    run = registry.Record(name=name, pid=0, argv=argv, log=logs[-nodes].path if nodes > 1 else logs[0].path, url=url,
                   server=family, started=time.time(), created=0.0, job=job, host=commands.host)
    run.save()
    for sink in sinks:
        sink.event(0.0, "submitted", job=job, logs=[lg.path for lg in logs])
    follow = Follow(commands, job, logs, server=family, url=url, port=port, stall=stall, timeout=timeout,
                    grace=grace, sinks=sinks, every=every, first=min(FIRST_POLL, every),
                    submitted=True)
    try:
        verdict, log = follow.run()
    except BaseException as e:  # Ctrl-C, or firedup failing: no job left holding nodes
        cancel(commands, job)
        run.stopped = time.time()
        run.save()
        e.add_note(f"cancelled job {job} (scancel{f' on {commands.host}' if commands.host else ''})")
        raise
    info = follow.poller.info
    if nodes > 1 and info.nodes:  # name the task logs by their nodes (one task per node, in order)
        for lg in logs[1:]:
            lg.label = info.nodes[int(lg.label.split()[1])] if lg.label.startswith("task ") else lg.label
    verdict = _describe(verdict, log, follow)
    run.url = follow.watches[logs.index(next(lg for lg in logs if lg.head))].url or follow.head_url()
    run.save()
    if memory is not None:
        verdict = memory.remember(verdict, kind="launch", name=name, log=run.log, environment=None,
                                  scheduler=verdict.slurm)
    if verdict.outcome == "ready" or (verdict.outcome == "stalled" and not kill_on_stall and info.state not in ENDED):
        state = "running" if verdict.outcome == "ready" else "left running for inspection"
        note = (f"{state}: job {job} on {','.join(info.nodes)}, log {run.log}; "
                f"stop it with: firedup stop {name}")
    else:
        if info.state not in ENDED:
            cancel(commands, job)
            note = f"cancelled job {job} (scancel{f' on {commands.host}' if commands.host else ''})"
            run.stopped = time.time()  # as a failed remote launch's: ps lists it no more
        else:
            note = f"job {job} ended {info.state}"
            run.ended = time.time()
        run.save()
    return Launched(run, verdict, note)


def watch(job: str, *, server: str | None = None, url: str | None = None, stall: float | None = STALL,
          timeout: float | None = None, grace: float = GRACE, sinks: Sequence[Sink] = (),
          commands: Commands | None = None, every: float = POLL_EVERY) -> Verdict:
    """Follow a job someone else submitted: its output (and error) log, and the scheduler."""
    commands = commands or Commands()
    try:
        info = scontrol_job(commands, job)
    except SlurmError as e:
        raise InputError(f"job {job}: {e}") from None
    paths = [p for p in dict.fromkeys((info.get("StdOut"), info.get("StdErr"))) if p and p != "/dev/null"]
    if not paths:
        raise InputError(f"job {job} writes no log firedup can follow (StdOut={info.get('StdOut')})")
    for p in paths:
        if not commands.folder_exists(os.path.dirname(p)):
            raise InputError(f"job {job} writes its log to {p}, whose folder does not exist: "
                             "Slurm cannot create it, so no log will ever appear (the job fails with 0:53)")
    logs = [Log("job", paths[0], head=True, batch=True)] + [Log("stderr", p) for p in paths[1:]]
    follow = Follow(commands, job, logs, server=server, url=url, port=None, stall=stall, timeout=timeout,
                    grace=grace, sinks=sinks, every=every)
    verdict, log = follow.run()
    return _describe(verdict, log, follow)


def state(job: str, host: str | None = None, ssh_args: Sequence[str] = ()) -> str:
    """The job's state for firedup ps: squeue's while slurmctld remembers it, then sacct's."""
    commands = commands_for(host, ssh_args)
    try:
        row = squeue(commands, job)
        if row is not None:
            return row["STATE"]
        rows = [r for r in sacct(commands, job) if r["JobID"] == job]
        return rows[0]["State"].split()[0] if rows else "UNKNOWN"
    except (SlurmError, SSHError):
        return "UNKNOWN"
    finally:
        commands.close()


def stop(run: registry.Record, ssh_args: Sequence[str] = ()) -> str:
    """Cancel the job, through its login node if it was launched through one."""
    assert run.job is not None
    commands = commands_for(run.host, ssh_args)
    try:
        cancel(commands, run.job)
    finally:
        commands.close()
    return f"cancelled job {run.job} (scancel{f' on {run.host}' if run.host else ''})"
