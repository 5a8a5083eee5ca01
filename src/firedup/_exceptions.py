"""The errors firedup raises for what it was asked to do, all under one base:

    FiredupError
    ├── InputError     what firedup was given cannot be used: a log it cannot read, a
    │                  server name or ledger run that does not exist, options that do not go together
    ├── LedgerError    the ledger file cannot be used (foreign, corrupt, from a newer firedup)
    ├── RuleError      a rule pack that does not hold together
    ├── SSHError       ssh could not reach or log in to a host
    ├── SlurmError     a Slurm command failed (the message is its own)
    ├── HttpError      a benchmarked server's answer is not the HTTP or the API expected
    ├── WorkloadError  a benchmark's workload cannot be made (dataset, tokenizer, lengths)
    ├── BenchFailed    every request of a benchmark failed: nothing was measured
    ├── PlotError      --plot cannot draw (no matplotlib, nothing to plot)
    └── ServerError    a server started with firedup.launch or firedup.run did not
        │              become ready; .verdict says why
        ├── ServerFailed
        ├── ServerStalled
        └── ServerTimeout

The command line prints a FiredupError as one line and exits 2 (a server
that did not become ready exits with its outcome's code instead, a benchmark
whose every request failed with 1). Any other exception is a bug in firedup,
and shows its traceback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ._outcome import Outcome

if TYPE_CHECKING:
    from .judge import Verdict


class FiredupError(Exception):
    """Base of the errors firedup raises for what it was asked to do."""


class InputError(FiredupError):
    """What firedup was given cannot be used: a log it cannot read, a server
    name or ledger run that does not exist, options that do not go together."""


class LedgerError(FiredupError):
    """The ledger file cannot be used (foreign, corrupt, from a newer firedup)."""


class RuleError(FiredupError):
    """A rule pack file that does not hold together."""


class SSHError(FiredupError):
    """ssh could not reach or log in to the host (not worth retrying)."""


class SlurmError(FiredupError):
    """A Slurm command failed; the message is its own."""


class HttpError(FiredupError):
    """A benchmarked server's answer is not the HTTP or the API expected."""


class WorkloadError(FiredupError):
    """A benchmark's workload cannot be made: its dataset, tokenizer or lengths."""


class BenchFailed(FiredupError):
    """Every request of a benchmark failed (a wrong model name, a server that
    answers only errors): nothing was measured; the message holds the first error."""


class PlotError(FiredupError):
    """A picture cannot be drawn: no matplotlib, or nothing to plot."""


class ServerError(FiredupError):
    """The server did not become ready; ``verdict`` says why, ``log`` is its log
    and ``note`` what was done with it (stopped, left running). Each subclass
    stands for one outcome: ``ServerError.of`` picks it."""

    outcome: ClassVar[Outcome]

    def __init__(self, verdict: Verdict, log: str, note: str | None = None):
        self.verdict = verdict
        self.log = log
        self.note = note
        where = f" (line {verdict.evidence['lineno']}: {verdict.evidence['line']})" if verdict.evidence else ""
        super().__init__(f"server {verdict.outcome}" + (f": {verdict.cause}" if verdict.cause else "")
                         + where + f"; log: {log}")

    @staticmethod
    def of(verdict: Verdict, log: str, note: str | None = None) -> ServerError:
        """The error for a verdict that is not ready: ServerFailed, ServerStalled or ServerTimeout."""
        cls = next(c for c in ServerError.__subclasses__() if c.outcome is verdict.outcome)
        return cls(verdict, log, note)


class ServerFailed(ServerError):
    """The server failed: it will not become ready."""

    outcome = Outcome.FAILED


class ServerStalled(ServerError):
    """The server showed no progress for the stall window."""

    outcome = Outcome.STALLED


class ServerTimeout(ServerError):
    """The server was not ready by the hard timeout."""

    outcome = Outcome.TIMEOUT
