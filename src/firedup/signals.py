"""What the rules engine tells the judge, one record per event."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .rules import Rule


@dataclass(frozen=True, slots=True)
class Signal:
    """One event.

    ``kind`` is a rule kind (``ready``, ``phase``, ``progress``, ``heartbeat``,
    ``fatal``, ``cause``, ``benign``, ``config``) or one the engine and sources
    add: ``exception`` (the exception line of a traceback, or a bare one),
    ``traceback`` (a traceback that ended before its exception line),
    ``detect`` (the server family became known), ``lines`` (how many new lines
    arrived, how many were heartbeats, the last one), ``evidence`` (liveness
    evidence from a probe: read bytes, GPU memory, child processes) and
    ``exit`` (the server process ended).
    """

    kind: str
    lineno: int = 0
    line: str = ""
    rule: Rule | None = None
    origin: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    # The rule that names the cause, when it is not ``rule`` itself: a fatal
    # line ("error loading model: unable to allocate CUDA0 buffer") or an
    # exception line whose cause a cause rule reads.
    explains: Rule | None = None
    # The line as the engine read it, under any prefix and any indent of a log
    # pasted indented: its message and the level it was logged at.
    message: str = ""
    level: str = ""

    @property
    def cause_rule(self) -> Rule | None:
        if self.explains is not None:
            return self.explains
        return self.rule if self.rule is not None and self.rule.cause else None

    @property
    def cause(self) -> str | None:
        rule = self.cause_rule
        return rule.cause if rule is not None else None
