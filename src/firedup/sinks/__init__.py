"""Where a watch's events and verdict go: the live view, plain lines, JSON lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..judge import Verdict


class Sink(Protocol):
    """What a Watch reports to: events as they happen (``t``: seconds since the
    start; the names and fields of docs/contract.md), the live state for a
    view, and the verdict with a note of what was done with the server.
    ``target``: one of several targets watched at once, which the events (a
    ``target`` field) and the verdict then name."""

    def event(self, t: float, name: str, **fields: Any) -> None: ...

    def update(self, view: dict[str, Any]) -> None: ...

    def verdict(self, verdict: Verdict, note: str | None = None, *, target: str | None = None) -> None: ...

    def close(self) -> None: ...


class Labelled:
    """The sink of one of several targets watched at once: what it is told goes
    on with the target's name."""

    def __init__(self, sink: Sink, target: str):
        self.sink = sink
        self.target = target

    def event(self, t: float, name: str, **fields: Any) -> None:
        self.sink.event(t, name, target=self.target, **fields)

    def update(self, view: dict[str, Any]) -> None:
        pass  # a view of one target among several would be a lie about the others

    def verdict(self, verdict: Verdict, note: str | None = None, *, target: str | None = None) -> None:
        self.sink.verdict(verdict, note, target=target or self.target)

    def close(self) -> None:
        pass
