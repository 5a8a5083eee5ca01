import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus" / "real"
FIXTURES = ROOT / "tests" / "fixtures"

# A test run started in the background (a shell's `make test &`) inherits SIGINT
# ignored, and so would every process it starts: the tests of what Ctrl-C does
# need it delivered. A handler (unlike an ignore) is reset to the default at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def corpus_logs() -> list[Path]:
    if not CORPUS.is_dir():
        if os.environ.get("CI"):
            raise RuntimeError(f"CI must run the corpus tests, but {CORPUS} is missing")
        return []
    return sorted(CORPUS.glob("*.log"))


def needs_corpus():
    return pytest.mark.skipif(
        not CORPUS.is_dir() and not os.environ.get("CI"),
        reason=f"the shared corpus ({CORPUS}) is not beside this clone",
    )


def run_cli(*args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "firedup", *args],
        input=stdin, capture_output=True, timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def assert_measured(proc: subprocess.CompletedProcess) -> None:
    """A bench (or run) that went to its end: exit 0, or 1 where the bench
    flagged its own measurement (a loaded machine read the tiny model's tokens,
    ~2 ms apart, together: "valid": false in its health). A run of repeats may
    flag one repeat and still exit 0."""
    flagged = b'"valid": false' in proc.stdout
    assert proc.returncode == 0 or (proc.returncode == 1 and flagged), proc.stderr.decode()[-2000:]


def zero_server(*args: str) -> tuple[str, list[str]]:
    """firedup's zero-work server (``python -m firedup.bench.zero ARGS``) as a command for
    ``firedup run --url URL -- COMMAND`` to launch on a free port: (URL, COMMAND)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}", [sys.executable, "-m", "firedup.bench.zero", *args, "--port", str(port)]


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Every test writes its runs, records and ledger under its own tmp_path."""
    monkeypatch.setenv("FIREDUP_LEDGER", str(tmp_path / "ledger.db"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def pytest_collection_modifyitems(items):
    """A test on the real Slurm cluster (the ``cluster`` fixture) is marked ``slurm``."""
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
