"""Logs the project captured from real servers it ran (transformers serve 5.24,
vLLM CPU 0.32.0 with a tiny random-weight model), with their labels; and, in
fixtures/outside, the failures an outside tester induced on the same servers
(kept out of captured/, whose logs train the tiny model's tokenizer)."""

import io
import json
from pathlib import Path

import pytest

from firedup import diagnose

from .conftest import FIXTURES

LOGS = sorted((FIXTURES / "captured").glob("*.log")) + sorted((FIXTURES / "outside").glob("*.log"))


def _label(log: Path) -> dict:
    return json.loads(log.with_suffix(".json").read_text())


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_captured_log(log):
    label = _label(log)
    verdict = diagnose(log)
    assert verdict.outcome == label["expect"]["outcome"]
    assert verdict.cause == label["expect"]["cause"]
    assert verdict.evidence["line"] == label["expect"]["evidence_line"]
    assert verdict.server == label["server"]


def test_fixtures_present():
    assert len(LOGS) >= 12


@pytest.mark.parametrize("lines", [50, 52])
def test_a_window_that_begins_in_a_stops_shutdown_is_no_failure(lines):
    """The last lines of a ready vLLM server stopped with Ctrl-C, as a user pastes
    them: its shutdown, and the engine reported dead as the shutdown stops it
    (EngineDeadError). Nothing failed: the window shows no start and no error
    before the shutdown began (the whole log reads ready)."""
    log = FIXTURES / "captured" / "vllm-ready-compiled.log"
    tail = b"\n".join(log.read_bytes().rstrip(b"\n").split(b"\n")[-lines:]) + b"\n"
    assert b"EngineDeadError" in tail and b"[shutdown]" in tail
    assert diagnose(io.BytesIO(tail)).outcome.value == "incomplete"
    assert diagnose(log).outcome.value == "ready"
