"""The registry of servers started by ``firedup launch``: where their logs go,
and the record ``firedup ps`` and ``firedup stop`` read (one JSON file per
server name). Not the run history: that is the ledger (``firedup.ledger``)."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from ._exceptions import InputError

KEEP_ENDED = 20  # records of ended servers kept for ps --all (their logs are never deleted)


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "firedup"


@dataclass
class Record:
    name: str
    pid: int
    argv: list[str]
    log: str
    url: str | None
    server: str | None
    started: float  # epoch seconds
    created: float  # the process's own start time: tells a reused pid apart
    host: str | None = None  # [user@]host[:port] for a server launched over SSH
    job: str | None = None  # a Slurm job id, for a server launched with --slurm
    stopped: float | None = None  # when firedup stopped it: a remote server or job is not asked again
    ended: float | None = None  # when firedup learned that its Slurm job had ended (squeue, sacct): not asked again

    @property
    def path(self) -> Path:
        return state_dir() / "runs" / f"{self.name}.json"

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path)
        prune()

    def alive(self) -> bool | None:
        """Whether it still runs (None: on a remote host, or a Slurm job not known to have ended: not asked here)."""
        if self.host or self.job:
            return False if self.stopped or self.ended else None
        try:
            proc = psutil.Process(self.pid)
            return abs(proc.create_time() - self.created) < 1.0 and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


def default_name(argv: list[str], server: str | None) -> str:
    stem = server or re.sub(r"\W+", "-", Path(argv[0]).name).strip("-") or "server"
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def load(name: str) -> Record:
    path = state_dir() / "runs" / f"{name}.json"
    try:
        return Record(**json.loads(path.read_text()))
    except FileNotFoundError:
        raise InputError(f"no launched server named {name!r} (see firedup ps)") from None
    except (ValueError, TypeError) as e:
        raise InputError(f"unreadable run record {path}: {e}") from None


def prune(keep: int = KEEP_ENDED) -> None:
    """Forget all but the ``keep`` latest servers known to have ended, lest ``ps --all`` grow without end;
    their logs are kept."""
    ended = [r for r in records() if r.alive() is False]
    for record in sorted(ended, key=lambda r: r.started, reverse=True)[keep:]:
        record.path.unlink(missing_ok=True)


def records() -> list[Record]:
    out = []
    for path in sorted((state_dir() / "runs").glob("*.json")):
        try:
            out.append(Record(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return out
