"""firedup: start, watch and diagnose LLM inference servers."""

from ._api import Server, ServerError, ServerFailed, ServerStalled, ServerTimeout, launch
from ._diagnose import InputError, diagnose
from .judge import Verdict
from .watch import Watch

__all__ = ["InputError", "Server", "ServerError", "ServerFailed", "ServerStalled", "ServerTimeout",
           "Verdict", "Watch", "diagnose", "launch"]
__version__ = "0.1.0"
