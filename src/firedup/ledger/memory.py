"""The ledger around one start-up: what is usual before it, what it was after."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._exceptions import LedgerError
from ..judge import Verdict
from . import history
from .store import Ledger


class Memory:
    def __init__(self, ledger: Ledger, server: str | None, argv: Sequence[str], host: str | None = None,
                 identity: Sequence[str] | None = None):
        """``identity``: what makes runs the same configuration when there is no
        command line (a watched log: its path), instead of ``argv``."""
        self.ledger = ledger
        self.server = server
        self.argv = list(argv)
        self.host = host
        self.fingerprint = history.fingerprint(server, identity if identity is not None else argv, host)
        past = ledger.find(fingerprint=self.fingerprint, not_kind="bench", limit=history.HISTORY)
        self.usual = history.expected(past)
        self.last_good = next((r for r in past if r["outcome"] == "ready"), None)
        self.started = time.time()

    def stall_for(self, stall: float | None) -> dict[str, float]:
        return history.stall_windows(self.usual, stall)

    def expectation(self) -> dict[str, Any] | None:
        """For the live view: how long this configuration usually takes."""
        if not self.usual:
            return None
        return {"ready_after": self.usual.get("total", {}).get("median"), "runs": self.usual.get("total", {}).get("n"),
                "phases": {p: e["median"] for p, e in self.usual.items() if p != "total"}}

    def remember(self, verdict: Verdict, *, kind: str, name: str | None, log: str | None,
                 environment: dict[str, Any] | None, scheduler: dict[str, Any] | None = None) -> Verdict:
        """Write the run; the verdict as it is recorded: with what was unusual,
        what changed since the last good run, and its run id (None, and the
        error in ``ledger.unrecorded``, when the write failed)."""
        run = {"kind": kind, "name": name, "host": self.host, "command": self.argv,
               "server": verdict.server or self.server,
               "version": verdict.version, "config": verdict.config, "phases": verdict.phases,
               "outcome": verdict.outcome, "cause": verdict.cause, "evidence": verdict.evidence, "log": log,
               "started": self.started, "elapsed": verdict.elapsed, "environment": environment or {},
               "fingerprint": self.fingerprint}
        if scheduler is not None:
            run["scheduler"] = scheduler
        anomalies = history.anomalies(verdict.phases, self.usual)
        changes = []
        # A start that knew nothing of itself (refused before the server ran: its
        # port taken) has nothing to set beside the last good run.
        known = environment is not None or bool(verdict.config)
        if self.last_good is not None and known and (anomalies or verdict.outcome != "ready"):
            changes = history.notable(history.diff(self.last_good, run))
        try:
            run_id = self.ledger.record(**run)
        except LedgerError as e:
            # The ledger was writable when it opened (a disk that filled since): the verdict still
            # counts, and the caller still stops a server that failed; it says what was not recorded.
            self.ledger.unrecorded.append(str(e))
            run_id = None
        return replace(verdict, anomalies=anomalies, changes=changes, run_id=run_id)
