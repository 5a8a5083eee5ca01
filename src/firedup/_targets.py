"""What ``firedup watch`` follows to a verdict: a local log, ``-`` (standard
input), ``ssh://[user@]host[:port]/abs/path`` or ``slurm://[[user@]host/]JOBID``;
one, or several at once. Each verdict is remembered in the ledger."""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import _url, rules, slurm
from ._exceptions import FiredupError, InputError
from ._sniff import is_device
from .defaults import GRACE, QUIET, STALL
from .judge import Verdict
from .ledger.memory import Memory
from .ledger.store import Ledger
from .sinks import Labelled, Sink
from .sources import process, ssh
from .watch import Watch


@dataclass(frozen=True)
class Follow:
    """How to follow a target (the options of ``firedup watch``)."""

    server: str | None = None
    url: str | None = None
    pid: int | None = None
    stall: float | None = STALL
    timeout: float | None = None
    grace: float = GRACE
    quiet: float = QUIET
    probe_generate: bool = False
    ssh_args: Sequence[str] = field(default_factory=tuple)


def _probed_here(target: str, follow: Follow) -> None:
    # a remote log's health is probed from its host, where no completion request is sent
    if follow.probe_generate and (slurm.target(target) is not None or ssh.parse_target(target) is not None):
        raise InputError(f"--probe-generate probes from this machine: it does not go with {target}")


def watch(target: str, follow: Follow, *, sinks: Sequence[Sink] = (), ledger: Ledger | None = None) -> Verdict:
    """Follow one target to its verdict (the sinks are closed before it returns)."""
    job = slurm.target(target)
    try:
        _probed_here(target, follow)
        if job is not None:
            return _watch_job(target, *job, follow, sinks, ledger)
        watching = _watch_for(target, follow, sinks)
        try:
            verdict = watching.run()
        finally:
            if watching.remote is not None:
                watching.remote.close()
    finally:
        for sink in sinks:
            sink.close()
    assert verdict is not None  # not cancelled
    return _remember(ledger, target, verdict)


def _watch_job(target: str, host: str | None, job: str, follow: Follow, sinks: Sequence[Sink],
               ledger: Ledger | None) -> Verdict:
    commands = slurm.commands_for(host, follow.ssh_args)
    try:
        verdict = slurm.watch(job, server=follow.server, url=follow.url, stall=follow.stall, timeout=follow.timeout,
                              grace=follow.grace, sinks=sinks, commands=commands)
    finally:
        commands.close()
    if ledger is None:
        return verdict
    assert verdict.slurm is not None
    return Memory(ledger, verdict.server, [], host).remember(verdict, kind="watch", name=target,
                                                             log=verdict.slurm["logs"]["job"], environment=None,
                                                             scheduler=verdict.slurm)


def _watch_for(target: str, follow: Follow, sinks: Sequence[Sink], cancel: threading.Event | None = None) -> Watch:
    remote = ssh.parse_target(target)
    if remote is not None:
        host, path = remote
        url = follow.url
        if url and _url.split(url)[0].path in ("", "/"):
            pack = rules.load().packs.get(follow.server) if follow.server else None
            url = url.rstrip("/") + (pack.health if pack and pack.health else "/health")
        source = ssh.RemoteSource(host, path, pid=follow.pid, url=url, ssh_args=list(follow.ssh_args))
        return Watch(remote=source, server=follow.server, stall=follow.stall, timeout=follow.timeout,
                     grace=follow.grace, sinks=sinks, cancel=cancel, quiet=follow.quiet)
    if follow.pid is not None and not process.pid_exists(follow.pid):
        raise InputError(f"no process {follow.pid}")
    if not target:
        raise InputError("no log given: a path, or - for standard input")
    if target != "-" and os.path.isdir(target):
        raise InputError(f"cannot watch {target}: is a directory")
    if is_device(sys.stdin.fileno() if target == "-" else target):  # /dev/zero would fill the memory
        raise InputError(f"{'standard input' if target == '-' else target} is a device, not a log")
    return Watch(log=None if target == "-" else target, stream=sys.stdin.buffer if target == "-" else None,
                 server=follow.server, pid=follow.pid, url=follow.url, stall=follow.stall, timeout=follow.timeout,
                 grace=follow.grace, sinks=sinks, probe_generate=follow.probe_generate, cancel=cancel,
                 quiet=follow.quiet)


def _remember(ledger: Ledger | None, target: str, verdict: Verdict) -> Verdict:
    if ledger is None:
        return verdict
    remote = ssh.parse_target(target)
    host = str(remote[0]) if remote else None
    log = target if remote or target == "-" else os.path.abspath(target)
    # A watched log has no command line: runs of the same log are one configuration;
    # standard input names none, so its runs are one when they printed the same settings
    # (none printed: a run of its own, never another pipe's).
    settings = json.dumps(verdict.config, sort_keys=True, default=str) if verdict.config else uuid.uuid4().hex
    memory = Memory(ledger, verdict.server, [], host, identity=["watch", log] + ([settings] if log == "-" else []))
    return memory.remember(verdict, kind="watch", name=target, environment=None, log=log)


@dataclass
class Overall:
    """Several targets watched at once: each one's verdict (None: no longer
    watched once another decided), and the most severe of them."""

    verdicts: dict[str, Verdict | None]

    @property
    def decided(self) -> dict[str, Verdict]:
        return {t: v for t, v in self.verdicts.items() if v is not None}

    @property
    def worst(self) -> tuple[str, Verdict]:
        """The target whose outcome is the overall one, and its verdict."""
        return max(self.decided.items(), key=lambda item: item[1].outcome.severity)


def watch_all(targets: Sequence[str], follow: Follow, sink: Sink, *, every: bool = False,
              ledger: Ledger | None = None) -> Overall:
    """Several targets at once, one thread each, their events labelled with
    their names on ``sink``; with ``every`` they are one multi-node server:
    the first that is not ready decides. Each verdict goes to ``sink``, named."""
    if any(t.startswith("slurm://") for t in targets):
        raise InputError("slurm://JOBID goes alone: firedup follows every log of a job itself")
    if follow.pid is not None:
        raise InputError("--pid goes with a single target")
    if "-" in targets:
        raise InputError("- (standard input) goes alone: it is one server's output")
    for target in targets:
        _probed_here(target, follow)
    cancel = threading.Event()
    watches = {t: _watch_for(t, follow, [Labelled(sink, t)], cancel) for t in targets}
    verdicts: dict[str, Verdict | None] = {}
    errors: dict[str, str] = {}

    def one(target: str, watching: Watch) -> None:
        try:
            verdicts[target] = verdict = watching.run()
        except FiredupError as e:  # this target cannot be watched (a host out of reach, a bad key)
            errors[target] = str(e)
            verdicts[target] = verdict = None
            if every:
                cancel.set()  # nor, then, the server it is a node of
        finally:
            if watching.remote is not None:
                watching.remote.close()
        if every and verdict is not None and verdict.outcome != "ready":
            cancel.set()  # one node failing fails the server

    threads = [threading.Thread(target=one, args=item, daemon=True) for item in watches.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    overall = Overall({t: _remember(ledger, t, v) if v is not None else None for t, v in verdicts.items()})
    if errors and every:
        raise InputError("; ".join(f"{t}: {e}" for t, e in errors.items()))
    for target, verdict in overall.decided.items():
        sink.verdict(verdict, target=target)  # the others' verdicts stand: one unusable target hides none
    if errors:
        raise InputError("; ".join(f"{t}: {e}" for t, e in errors.items()))
    return overall
