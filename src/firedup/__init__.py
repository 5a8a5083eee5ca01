"""firedup: start, watch and diagnose LLM inference servers."""

from ._api import Server, launch
from ._diagnose import diagnose
from ._outcome import Outcome
from ._exceptions import (FiredupError, HttpError, InputError, LedgerError, PlotError, RuleError, ServerError,
                          ServerFailed, ServerStalled, ServerTimeout, SlurmError, SSHError, WorkloadError)
from .judge import Verdict
from .watch import Watch

__all__ = ["FiredupError", "HttpError", "InputError", "LedgerError", "Outcome", "PlotError", "RuleError", "SSHError", "Server",
           "ServerError", "ServerFailed", "ServerStalled", "ServerTimeout", "SlurmError", "Verdict", "Watch",
           "WorkloadError", "diagnose", "launch"]
__version__ = "0.1.0"
