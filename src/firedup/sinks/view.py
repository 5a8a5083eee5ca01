"""The ledger for people: a table of runs, one run with its phases as bars,
the changes between two runs."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .summary import MARK, STYLE

BAR_WIDTH = 40


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def runs_table(runs: list[dict[str, Any]], console: Console) -> None:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("run", "started", "kind", "name", "host", "server", "outcome", "cause", "took", "config id"):
        table.add_column(column, no_wrap=column not in ("name",))
    for r in runs:
        outcome = Text(f"{MARK[r['outcome']]} {r['outcome']}", STYLE[r["outcome"]])
        took = f"{r['elapsed']:.0f} s" if r.get("elapsed") else ""
        table.add_row(str(r["id"]), _when(r["started"]), r["kind"], r.get("name") or "", r.get("host") or "local",
                      r.get("server") or "", outcome, r.get("cause") or "", took, r.get("fingerprint") or "")
    console.print(table)


def show(run: dict[str, Any], console: Console) -> None:
    head = Text(f"run {run['id']}  ", "bold")
    head.append(f"{MARK[run['outcome']]} {run['outcome']}", STYLE[run["outcome"]])
    if run.get("cause"):
        head.append(f"  cause: {run['cause']}", "bold")
    console.print(head)
    for label, value in (("started", _when(run["started"])), ("kind", run["kind"]), ("name", run.get("name")),
                         ("host", run.get("host") or "local"), ("server", run.get("server")),
                         ("version", run.get("version")), ("command", " ".join(run["command"])),
                         ("log", run.get("log")), ("config id", run.get("fingerprint"))):
        if value:
            console.print(Text(f"  {label}: ", "dim") + Text(str(value)), overflow="fold")
    if run.get("evidence"):
        console.print(Text(f"  line {run['evidence']['lineno']}: ", "dim") + Text(run["evidence"]["line"]))
    phases = {p: s for p, s in run["phases"].items() if p != "serving"}
    if phases:
        longest = max(phases.values()) or 1.0
        console.print(Text("  phases:", "dim"))
        for phase, seconds in phases.items():
            bar = "█" * max(1, round(BAR_WIDTH * seconds / longest)) if seconds > 0 else ""
            console.print(Text(f"    {phase:<12} ") + Text(bar, "cyan") + Text(f" {seconds:.1f} s", "dim"))
    env = run.get("environment") or {}
    if env.get("packages"):
        console.print(Text("  packages: ", "dim") + Text(", ".join(f"{k} {v}" for k, v in env["packages"].items())),
                      overflow="fold")
    if env.get("gpus"):
        console.print(Text("  gpus: ", "dim") + Text(f"{', '.join(env['gpus'])} (driver {env.get('driver')})"))
    if env.get("env"):
        console.print(Text("  env: ", "dim") + Text(" ".join(f"{k}={v}" for k, v in env["env"].items())),
                      overflow="fold")
    if run["config"]:
        console.print(Text("  config: ", "dim") + Text(", ".join(f"{k}={v}" for k, v in run["config"].items())),
                      overflow="fold")


def diff(a: int, b: int, changes: list[dict[str, Any]], console: Console) -> None:
    if not changes:
        console.print(f"runs {a} and {b}: same configuration, environment and phase durations")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("", "", f"run {a}", f"run {b}"):
        table.add_column(column, overflow="fold")
    for c in changes:
        old, new = c["a"], c["b"]
        if c["section"] == "phases":
            old = f"{old:.1f} s" if old is not None else "-"
            new = f"{new:.1f} s" if new is not None else "-"
        table.add_row(c["section"], c["key"], "-" if old is None else str(old), "-" if new is None else str(new))
    console.print(table)
