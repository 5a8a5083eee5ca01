"""Servers firedup starts, wherever they run: here, on a host over SSH, or as
a Slurm job. What ``firedup launch``, ``stop`` and ``ps`` call."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import registry, slurm
from ._exceptions import InputError
from ._launch import Launched, start_and_watch, start_remote, stop_remote
from .defaults import GRACE, STALL, STOP_GRACE
from .ledger.store import Ledger
from .sinks import Sink
from .sources import pgroup, ssh
from .sources.slurm import ENDED


@dataclass(frozen=True)
class SlurmJob:
    """How to submit a server as a Slurm job (``launch --slurm``)."""

    nodes: int = 1
    sbatch_args: Sequence[str] = ()
    log_dir: str | os.PathLike | None = None


@dataclass(frozen=True)
class Start:
    """How to start a server and follow it to a verdict (the options of ``firedup launch``)."""

    name: str | None = None
    server: str | None = None
    url: str | None = None
    log: str | os.PathLike | None = None
    stall: float | None = STALL
    timeout: float | None = None
    grace: float = GRACE
    kill_on_stall: bool = False
    probe_generate: bool = False
    port_check: bool = True
    host: str | None = None  # [user@]host[:port]: over SSH; with slurm, the login node
    slurm: SlurmJob | None = None
    ssh_args: Sequence[str] = field(default_factory=tuple)


def launch(argv: Sequence[str], start: Start, *, sinks: Sequence[Sink] = (),
           ledger: Ledger | None = None) -> Launched | slurm.Launched:
    """Start ``argv`` here, on ``start.host`` or as a Slurm job, and follow it to
    its verdict: kept running when ready, stopped otherwise (a stalled server
    is left for inspection unless ``kill_on_stall``). The sinks are closed
    before it returns; the verdict is theirs to show."""
    try:
        if start.probe_generate and (start.slurm is not None or start.host):
            raise InputError("--probe-generate probes a server started on this machine, not with --host or --slurm")
        if start.slurm is not None:
            return _launch_job(argv, start, sinks, ledger)
        if start.host:
            return start_remote(ssh.Host.parse(start.host), argv, name=start.name, server=start.server, url=start.url,
                                stall=start.stall, timeout=start.timeout, grace=start.grace,
                                kill_on_stall=start.kill_on_stall, sinks=sinks, ssh_args=start.ssh_args,
                                ledger=ledger, port_check=start.port_check)
        return start_and_watch(argv, name=start.name, server=start.server, log=start.log, url=start.url,
                               stall=start.stall, timeout=start.timeout, grace=start.grace,
                               kill_on_stall=start.kill_on_stall, sinks=sinks, probe_generate=start.probe_generate,
                               ledger=ledger, port_check=start.port_check)
    finally:
        for sink in sinks:
            sink.close()


def _launch_job(argv: Sequence[str], start: Start, sinks: Sequence[Sink], ledger: Ledger | None) -> slurm.Launched:
    assert start.slurm is not None
    if start.slurm.nodes < 1:
        raise InputError("--nodes must be 1 or more")
    commands = slurm.commands_for(start.host, start.ssh_args)
    try:
        return slurm.launch(argv, name=start.name, nodes=start.slurm.nodes, sbatch_args=start.slurm.sbatch_args,
                            log_dir=start.slurm.log_dir, server=start.server, url=start.url, stall=start.stall,
                            timeout=start.timeout, grace=start.grace, kill_on_stall=start.kill_on_stall, sinks=sinks,
                            ledger=ledger, commands=commands)
    finally:
        commands.close()


def stop(name: str, grace: float = STOP_GRACE, ssh_args: Sequence[str] = ()) -> str:
    """Stop the server ``firedup launch`` started under ``name`` (SIGTERM, then
    SIGKILL after ``grace``; a Slurm job is cancelled): what became of it."""
    record = registry.load(name)
    if record.job:
        state = slurm.state(record.job, record.host, ssh_args)
        if state in ENDED:  # stopped before, or ended by itself: nothing to cancel
            if record.alive() is not False:
                record.ended = time.time()
                record.save()
            return f"{record.name}: job {record.job} had already ended ({state}), nothing to cancel"
        said = f"{record.name}: {slurm.stop(record, ssh_args)}"
    elif record.host:
        said = f"{record.name} on {record.host}: {stop_remote(record, grace, ssh_args)}"
    elif not record.alive():
        return f"{record.name} is not running"
    else:
        said = f"{record.name}: {pgroup.stop_group(record.pid, grace)}"
    record.stopped = time.time()
    record.save()
    return said


def listing() -> list[dict[str, Any]]:
    """The servers ``firedup launch`` started, as ``firedup ps --all --json`` lists them."""
    rows = []
    for r in registry.records():
        alive, job = r.alive(), {}
        if r.job:
            state = slurm.state(r.job, r.host)
            if state in ENDED and alive is not False:
                r.ended = time.time()  # known to have ended: pruned as an exited local server is
                r.save()
            alive = False if r.alive() is False else None if state == "UNKNOWN" else True
            job = {"job": r.job, "job_state": state}
        rows.append({"name": r.name, "host": r.host, "pid": None if r.job else r.pid, "alive": alive,
                     "stopped": r.stopped is not None, "server": r.server, "url": r.url, "log": r.log,
                     "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started)),
                     "cmd": " ".join(r.argv), **job})
    return rows
