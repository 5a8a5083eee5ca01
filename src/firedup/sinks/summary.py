"""A verdict for people: a few short lines, coloured on a terminal."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

from ..judge import Verdict
from ..ledger.history import change_lines

MAX_CONFIG = 8
MAX_EVIDENCE = 400
MAX_STACK_LINES = 60
# Configuration keys worth a glance first when a server prints dozens.
KEY_CONFIG = ("model", "model_path", "model_id", "attention_backend", "tp_size",
              "tensor_parallel_size", "dtype", "quantization", "max_model_len",
              "context_length", "mem_fraction_static", "gpu_memory_utilization", "port")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """A log line as a terminal can show it: control bytes (a binary file read
    as a log) escaped as \\xNN, tabs kept."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _config_items(config: dict) -> list[tuple[str, object]]:
    keys = [k for k in KEY_CONFIG if k in config]
    keys += [k for k in config if k not in keys]
    return [(k, config[k]) for k in keys[:MAX_CONFIG]]


def render(verdict: Verdict, console: Console, source: str = "") -> None:
    head = Text()
    head.append(f"{verdict.outcome.mark} {verdict.outcome}", verdict.outcome.style)
    if verdict.cause:
        head.append(f"  cause: {verdict.cause}", "bold")
    bits = [b for b in (verdict.server or "unknown server", verdict.version and f"v{verdict.version}",
                        verdict.phase and f"phase {verdict.phase}", source) if b]
    head.append("  (" + ", ".join(bits) + ")", "dim")
    console.print(head)
    if verdict.evidence:
        lineno = verdict.evidence.get("lineno")
        line = Text(f"  line {lineno}: " if lineno else "  evidence: ", "dim")
        text = printable(verdict.evidence["line"])
        line.append(text if len(text) <= MAX_EVIDENCE else text[:MAX_EVIDENCE] + "…")
        console.print(line, overflow="fold")
    if verdict.explanation:
        console.print(Text("  why: ", "bold") + Text(verdict.explanation))
    if verdict.remedy:
        console.print(Text("  fix: ", "bold") + Text(verdict.remedy))
    if verdict.progress:
        p = verdict.progress
        total = f"/{p['total']}" if p.get("total") else ""
        console.print(Text(f"  progress: {p['desc']} {p['n']}{total}", "dim"))
    if verdict.config:
        items = ", ".join(f"{k}={v}" for k, v in _config_items(verdict.config))
        more = len(verdict.config) - MAX_CONFIG
        console.print(Text(f"  config: {items}" + (f" (+{more} more)" if more > 0 else ""), "dim"),
                      overflow="ellipsis", no_wrap=True)
    if verdict.benign:
        first = verdict.benign[0]
        console.print(Text(f"  {len(verdict.benign)} other error-looking line(s) did not decide it, e.g. line "
                           f"{first['lineno']} [{first['rule']}]: {printable(first['line'])}", "dim"),
                      overflow="ellipsis", no_wrap=True)
    for note in verdict.notes:
        console.print(Text("  note: ", "bold yellow") + Text(note))
    for anomaly in verdict.anomalies:
        console.print(Text("  slow: ", "bold yellow") + Text(anomaly))
    if verdict.changes:
        changed = change_lines(verdict.changes)
        console.print(Text("  changed since the last good run:", "bold")
                      + Text("" if changed else " nothing in its configuration or environment"))
        for text in changed:
            console.print(Text(f"    {text}"), overflow="ellipsis", no_wrap=True)
    if verdict.stacks:
        stack = verdict.stacks.splitlines()
        console.print(Text("  where it waits (py-spy dump):", "bold"))
        for text in stack[:MAX_STACK_LINES]:
            console.print(Text(f"    {text}", "dim"), overflow="ellipsis", no_wrap=True)
        if len(stack) > MAX_STACK_LINES:
            console.print(Text(f"    … {len(stack) - MAX_STACK_LINES} more lines", "dim"))
