"""The live terminal view: phase, progress bar with ETA, elapsed, last line,
warnings ignored; plain timestamped lines when the output is not a terminal."""

from __future__ import annotations

import signal
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..judge import Verdict
from . import summary


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def _waiting(log: str) -> str:
    return f"{log} does not exist yet; it is followed from when it appears"


def _exit(code: int) -> str:
    if code == -255:  # sources.process: a writer found for a log, not firedup's child
        return "ended (its exit status went to its parent, not to firedup)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"code {code}"


def phase_line(phases: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases.items() if seconds >= 0.5)


def final(console: Console, verdict: Verdict, note: str | None, target: str | None = None) -> None:
    """The verdict (under its target's name, of several), its phase durations and what to do next."""
    if target:
        console.print(f"{target}:")
    summary.render(verdict, console)
    phases = phase_line(verdict.phases)  # phases under half a second are left out, and maybe all of them
    if phases:
        console.print(Text(f"  phases: {phases}", "dim"))
    if note:
        console.print(Text(f"  {note}"))


class Eta:
    """Remaining time of a progress counter from its rate since it was first seen."""

    def __init__(self) -> None:
        self._first: tuple[str, int, float] | None = None

    def __call__(self, progress: dict[str, Any] | None, now: float) -> float | None:
        if not progress or not progress.get("total"):
            return None
        desc, n = progress["desc"], progress["n"]
        if self._first is None or self._first[0] != desc or n < self._first[1]:
            self._first = (desc, n, now)
            return None
        done = n - self._first[1]
        if done <= 0:
            return None
        return (progress["total"] - n) * (now - self._first[2]) / done


class LiveView:
    def __init__(self, console: Console, title: str):
        self.console = console
        self.title = title
        self.eta = Eta()
        self.live = Live(console=console, refresh_per_second=8, transient=True)
        self.live.start()

    def event(self, t: float, name: str, **fields: Any) -> None:
        if name in ("phase", "warning", "exit"):
            what = _exit(fields["code"]) if name == "exit" else fields.get("phase") or fields.get("line")
            self.live.console.print(Text(f"{_clock(t)} {name}: {what}", "dim"))
        elif name == "waiting":
            self.live.console.print(Text(f"{_clock(t)} waiting: {_waiting(fields['log'])}", "dim"))

    def update(self, view: dict[str, Any]) -> None:
        server = view["server"] or "server"
        # "launch transformers" (transformers serve) names the family already
        named = "" if server in self.title.split() else f"{server}  "
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Text(f"{self.title}", "bold"), Text(f"{named}phase: {view['phase']}"),
                     Text(f"elapsed {_clock(view['elapsed'])}", "dim"))
        rows: list[RenderableType] = [grid]
        progress = view.get("progress")
        if progress and progress.get("total"):
            eta = self.eta(progress, view["elapsed"])
            bar = Table.grid(padding=(0, 1))
            bar.add_row(ProgressBar(total=progress["total"], completed=progress["n"], width=30),
                        Text(f"{progress['desc']} {progress['n']}/{progress['total']}"),
                        Text(f"ETA {_clock(eta)}" if eta is not None else "", "dim"))
            rows.append(bar)
        elif view.get("expect") and view["expect"].get("ready_after"):
            usual = view["expect"]["ready_after"]
            left = max(0.0, usual - view["elapsed"])
            rows.append(Text(f"usually ready after {_clock(usual)} for this configuration: ETA {_clock(left)}", "dim"))
        if view.get("last"):
            rows.append(Text(f"last: {view['last']}", "dim", overflow="ellipsis", no_wrap=True))
        if view.get("warnings"):
            rows.append(Text(f"{view['warnings']} warning(s) ignored", "dim"))
        self.live.update(Group(*rows))

    def verdict(self, verdict: Verdict, note: str | None = None, *, target: str | None = None) -> None:
        self.live.stop()
        final(self.console, verdict, note, target)

    def close(self) -> None:
        self.live.stop()


class PlainView:
    """One line per event, for logs and pipes."""

    def __init__(self, console: Console):
        self.console = console
        self._progress_step = -1

    def event(self, t: float, name: str, **fields: Any) -> None:
        if "target" in fields:  # one of several targets: its name first, the fields as they are
            name = f"{fields.pop('target')} {name}"
        if name == "progress":
            total = fields.get("total") or 0
            step = int(10 * fields["n"] / total) if total else fields["n"]
            if step == self._progress_step:
                return
            self._progress_step = step
            text = f"{fields['desc']} {fields['n']}" + (f"/{total}" if total else "")
        elif name == "phase":
            self._progress_step = -1
            text = fields["phase"]
        elif name == "warning":
            text = fields["line"]
        elif name == "config":
            text = ", ".join(f"{k}={v}" for k, v in list(fields["config"].items())[:6])
        elif name == "waiting":
            text = _waiting(fields["log"])
        elif name == "exit":  # a scheduler's word on the job comes with its line
            text = f"{fields['line']} ({_exit(fields['code'])})" if fields.get("line") else _exit(fields["code"])
        elif name == "expect":
            runs = fields["runs"]
            text = (f"usually ready after {fields['ready_after']:.0f} s ({runs} run{'s' if runs != 1 else ''}): "
                    + ", ".join(f"{p} {s:.0f} s" for p, s in fields["phases"].items()))
        else:  # what is not known yet (no --pid, no URL, the family) is left out
            text = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        self.console.print(Text(f"[{t:7.1f}s] {name}: {text}"), overflow="ellipsis", no_wrap=True, soft_wrap=False)

    def update(self, view: dict[str, Any]) -> None:
        pass

    def verdict(self, verdict: Verdict, note: str | None = None, *, target: str | None = None) -> None:
        final(self.console, verdict, note, target)

    def close(self) -> None:
        pass
