"""JSON lines: one event a line, the verdict last (docs/contract.md: ``--json`` events)."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from ..judge import Verdict


class JsonEvents:
    def __init__(self, out: TextIO = sys.stdout):
        self.out = out

    def event(self, t: float, name: str, **fields: Any) -> None:
        self.out.write(json.dumps({"t": round(t, 3), "event": name, **fields}, ensure_ascii=False) + "\n")
        self.out.flush()

    def update(self, view: dict[str, Any]) -> None:
        pass

    def verdict(self, verdict: Verdict, note: str | None = None, *, target: str | None = None) -> None:
        fields = verdict.to_dict(live=True)
        if note:
            fields["note"] = note
        self.event(verdict.elapsed, verdict.outcome, **({"target": target} if target else {}), **fields)

    def close(self) -> None:
        pass
