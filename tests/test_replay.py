"""One truth, replayed: every labelled real log the project holds, written line
by line into a file that `firedup watch LOG --json` follows with no pid, gets
the verdict `firedup diagnose --json` gives the whole file (``incomplete`` is
``stalled`` live, unless it was stopped from outside): the same outcome, cause and evidence line.

Two ways of writing: all at once, and in a dozen bursts cut at random lines
with pauses shorter than the idle flush in between. The shared corpus and the
captured logs are replayed both ways; each of the thousands of reported logs
one way, chosen by its name, so both ways cover them and the run stays within
CI's time. The writer opens and closes the file
for each write, so the watch finds no writer and judges from the log alone,
as it must for a log whose server it cannot see. The replays run side by side
(most of their time is the quiet period and the stall window)."""

import json
import os
import random
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from firedup import rules
from firedup.lines import parse

from .conftest import CORPUS, FIXTURES, corpus_logs

STALL = 5.0  # the stall window: longer than the quiet period (2 s) and any pause
PAUSE = 0.3  # the longest pause between bursts: below the idle flush (0.5 s)
BURSTS = 12  # cut at random lines, so bursts end anywhere: inside tracebacks, after ready lines
WORKERS = 8

pytestmark = pytest.mark.slow  # minutes: every log is watched to its verdict


def labelled_logs() -> list[Path]:
    logs = corpus_logs()
    for folder in ("captured", "reported"):
        logs += sorted(p for p in (FIXTURES / folder).glob("*.log") if p.with_suffix(".json").exists())
    return logs


LOGS = labelled_logs()
MODES = ("fast", "paused")


def _modes(log: Path) -> tuple[str, ...]:
    if log.parent.name != "reported":
        return MODES
    return (MODES[zlib.crc32(log.name.encode()) % 2],)


JOBS = [(log, mode) for log in LOGS for mode in _modes(log)]


def _before_bind(line: str) -> bool:
    message = parse(line).message
    return any(r.before_bind and r.pattern.search(message) for r in rules.load().rules)


def _restarted(log: Path, first: int, last: int) -> bool:
    """Whether a line a server prints once as it starts comes between two line numbers."""
    starts = [r for r in rules.load().rules if r.start]
    lines = log.read_bytes().decode("utf-8", "replace").split("\n")[first:last - 1]
    return any(r.pattern.search(parse(line).message) for line in lines for r in starts)


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "FIREDUP_LEDGER": str(tmp / "ledger.db"),
            "XDG_STATE_HOME": str(tmp / "state")}


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _replay(log: Path, mode: str, tmp: Path) -> dict:
    data = log.read_bytes()
    target = tmp / f"{log.stem}.{mode}.log"
    target.write_bytes(b"")
    started = time.monotonic()
    watch = subprocess.Popen(
        [sys.executable, "-m", "firedup", "watch", "--json", "--stall", str(STALL), str(target)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp),
    )
    events = []
    for line in watch.stdout:  # following the empty log, its writer looked for
        events.append(json.loads(line))
        if events[-1]["event"] == "writer":
            break
    if mode == "fast":
        _append(target, data)
    else:
        rng = random.Random(log.name)
        lines = data.splitlines(keepends=True)
        cuts = sorted(rng.sample(range(1, len(lines)), min(BURSTS, len(lines) - 1))) if len(lines) > 1 else []
        for start, end in zip([0, *cuts], [*cuts, len(lines)]):
            _append(target, b"".join(lines[start:end]))
            time.sleep(rng.uniform(0, PAUSE))
    out, err = watch.communicate(timeout=120)
    events += [json.loads(line) for line in out.splitlines()]
    # A watch that printed nothing fails its own test, with what it said, not the whole module.
    return {"verdict": events[-1] if events else None, "events": events, "stderr": err.decode(),
            "code": watch.returncode, "seconds": time.monotonic() - started}


def _diagnose(log: Path, tmp: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "firedup", "diagnose", "--json", str(log)],
                          capture_output=True, env=_env(tmp), timeout=60)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    with ThreadPoolExecutor(WORKERS) as pool:
        diagnosed = dict(zip(LOGS, pool.map(lambda log: _diagnose(log, tmp), LOGS)))
        watched = dict(zip(JOBS, pool.map(lambda job: _replay(*job, tmp), JOBS)))
    return diagnosed, watched


def test_every_labelled_log_is_replayed():
    assert not CORPUS.is_dir() or len(corpus_logs()) >= 20
    assert len(list((FIXTURES / "captured").glob("*.json"))) >= 19
    reported = [mode for log, mode in JOBS if log.parent.name == "reported"]
    assert all(reported.count(mode) > len(reported) / 3 for mode in MODES), {m: reported.count(m) for m in MODES}


@pytest.mark.parametrize(("log", "mode"), JOBS, ids=[f"{log.stem}-{mode}" for log, mode in JOBS])
def test_watching_the_log_alone_agrees_with_diagnose(replays, log, mode):
    diagnosed, watched = replays
    want, got = diagnosed[log], watched[(log, mode)]
    verdict = got["verdict"]
    assert got["stderr"] == "" and verdict is not None, (got["code"], got["seconds"], got["stderr"])
    stopped = want["outcome"] == "incomplete" and "stopped from outside" in want["explanation"]
    outcome = "stalled" if want["outcome"] == "incomplete" and not stopped else want["outcome"]
    if (mode == "paused" and want["outcome"] == "failed" and want["phase"] == "serving"
            and verdict["outcome"] == "ready"):
        # Failed after it was ready: a live watch has its verdict at the ready
        # line. Not a bind error after a ready line printed before the bind:
        # it follows at once, and the watch waits for it.
        assert not (want["cause"] == "port_in_use" and _before_bind(verdict["evidence"]["line"])), verdict
        return
    if want["outcome"] == "ready" and any("during the server's own warm-up" in n for n in want.get("notes", [])):
        # a finished log that ends inside SGLang's warm-up was up; watched live, that
        # silence is a warm-up that hangs
        assert verdict["outcome"] == "stalled", verdict
        return
    if want["outcome"] == "ready" and any(n.startswith("an offline engine") for n in want.get("notes", [])):
        # a finished log of an offline engine that ends as it is up was up; watched
        # live, that silence is a start that hangs
        assert verdict["outcome"] == "stalled", verdict
        return
    first, last = verdict["evidence"]["lineno"], want["evidence"]["lineno"]
    if mode == "paused" and first < last and _restarted(log, first, last):
        return  # two runs appended to one log: a live watch answers for the first (its ready line, its failure)
    assert (verdict["outcome"], verdict["cause"]) == (outcome, want["cause"]), verdict
    assert verdict["evidence"]["line"] == want["evidence"]["line"]
