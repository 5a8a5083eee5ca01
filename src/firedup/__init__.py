"""firedup: start, watch and diagnose LLM inference servers.

The names below are the Python API; the modules behind them are private
(``firedup._launch``, ``firedup._run`` ...), as in httpx, so that no public
name is also a module's."""

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

from ._api import Server, launch
from ._diagnose import diagnose
from ._exceptions import (
    BenchFailed,
    FiredupError,
    HttpError,
    InputError,
    LedgerError,
    PlotError,
    RuleError,
    ServerError,
    ServerFailed,
    ServerStalled,
    ServerTimeout,
    SlurmError,
    SSHError,
    WorkloadError,
)
from ._outcome import Outcome
from ._run import RunResult, run
from ._servers import SlurmJob
from .bench.workload import Workload
from .judge import Verdict
from .ledger.store import Ledger
from .sinks import Sink
from .watch import Watch

__all__ = [
    "BenchFailed",
    "diagnose",
    "FiredupError",
    "HttpError",
    "InputError",
    "launch",
    "Ledger",
    "LedgerError",
    "Outcome",
    "PlotError",
    "RuleError",
    "run",
    "RunResult",
    "Server",
    "ServerError",
    "ServerFailed",
    "ServerStalled",
    "ServerTimeout",
    "Sink",
    "SlurmError",
    "SlurmJob",
    "SSHError",
    "Verdict",
    "Watch",
    "Workload",
    "WorkloadError",
]
for _name in __all__:
    setattr(globals()[_name], "__module__", "firedup")  # as they are used: firedup.Verdict, not firedup.judge.Verdict
del _name
