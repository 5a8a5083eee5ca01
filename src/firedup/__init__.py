"""firedup: start, watch and diagnose LLM inference servers."""

from .diagnose import InputError, diagnose
from .judge import Verdict

__all__ = ["InputError", "Verdict", "diagnose"]
__version__ = "0.1.0"
