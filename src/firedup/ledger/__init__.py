"""The run ledger: every start-up remembered (SQLite), with its configuration,
environment and phase durations, so that firedup can tell what is usual for a
configuration and what changed when it is not."""

from .store import Ledger, LedgerError, ledger_path

__all__ = ["Ledger", "LedgerError", "ledger_path"]
