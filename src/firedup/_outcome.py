"""How a start-up ended, and what each outcome means to a program and to a person."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """How a start-up ended (docs/contract.md), a string equal to its name
    (``Outcome.READY == "ready"``), with the exit code the command line ends
    with, the mark and style a person sees, and its severity: of several
    targets watched at once, the most severe outcome is the overall one."""

    exit_code: int
    mark: str
    style: str
    severity: int

    READY = "ready", 0, "✓", "bold green", 0
    FAILED = "failed", 1, "✗", "bold red", 4
    STALLED = "stalled", 3, "…", "bold yellow", 3
    TIMEOUT = "timeout", 4, "⏱", "bold yellow", 2
    INCOMPLETE = "incomplete", 5, "?", "bold yellow", 1

    def __new__(cls, value: str, exit_code: int = 0, mark: str = "", style: str = "", severity: int = 0) -> Outcome:
        member = str.__new__(cls, value)
        member._value_ = value
        member.exit_code = exit_code
        member.mark = mark
        member.style = style
        member.severity = severity
        return member
